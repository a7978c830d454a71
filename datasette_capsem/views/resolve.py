"""Display names to session ids: `/-/capsem/resolve?name=NAME[&to=PATH]` and its `.json`.

Everything is keyed by id; a name is only a way in. The rules, in order:

1. A string that is a session's id and not also that session's name (UUIDs, 0.x ids) is that
   session, whatever other session may be *named* like it: an id never resolves elsewhere,
   so a VM named like another session's id can never show the other's data.
2. Otherwise every session carrying the name is a candidate: a pre-2026-06-26 session whose
   id was its name, and a registry entry with a newer UUID for the same VM, both match.
   One candidate resolves; several give a chooser page; none gives a 404 with near matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from datasette.utils.asgi import Response

from datasette_capsem import permissions
from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.index.listing import session_href
from datasette_capsem.state import get_state
from datasette_capsem.views import render

MAX_NAME_LENGTH = 256
# `to` is a path under the session's page: plain segments only, no scheme, host or '..'.
SAFE_TO = re.compile(r"^[A-Za-z0-9_.~-]+(/[A-Za-z0-9_.~-]+)*/?$")


@dataclass
class Resolution:
    name: str
    id: str | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ambiguous(self) -> bool:
        return self.id is None and len(self.candidates) > 1

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "id": self.id, "candidates": self.candidates}


def _candidate(session: Session, match: str) -> dict[str, Any]:
    return {
        "id": session.id,
        "name": session.name,
        "match": match,
        "kind": session.kind,
        "status": session.status,
        "created_at": session.created_at,
        "stopped_at": session.stopped_at,
        "has_ledger": session.has_ledger,
        "same_vm_as": session.same_vm_as,
        "href": session_href(session.id),
    }


def resolve_name(catalog: Catalog, name: str) -> Resolution:
    """Apply the rules of the module docstring against the current catalog."""
    sessions = catalog.snapshot().sessions
    by_id = sessions.get(name)
    named = [s for s in sessions.values() if s.name == name and s is not by_id]
    named.sort(key=lambda s: (s.created_at or "", s.id), reverse=True)
    candidates = ([_candidate(by_id, "id")] if by_id else []) + [
        _candidate(s, "name") for s in named
    ]
    resolution = Resolution(name=name, candidates=candidates)
    if by_id is not None and (by_id.name != name or not named):
        resolution.id = by_id.id
    elif by_id is None and len(named) == 1:
        resolution.id = named[0].id
    return resolution


def _bad(datasette, request, message: str):
    return render.error(datasette, request, 400, "Bad parameter", message)


async def resolve(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        return await render.error(datasette, request, 403, "Forbidden", "You may not view this.")
    name = (request.args.get("name") or "").strip()
    to = (request.args.get("to") or "").strip() or None
    if not name:
        return await _bad(datasette, request, "name is required: /-/capsem/resolve?name=NAME")
    if len(name) > MAX_NAME_LENGTH or "\x00" in name:
        return await _bad(datasette, request, f"name must be under {MAX_NAME_LENGTH} characters")
    if to is not None and (not SAFE_TO.match(to) or ".." in to.split("/")):
        return await _bad(datasette, request, "to must be a relative path like 'traces/abc'")
    catalog = get_state(datasette).catalog
    resolution = resolve_name(catalog, name)
    if not resolution.candidates:
        near = [_candidate(s, "near") for s in catalog.near_matches(name)]
        return await render.error(
            datasette, request, 404, "Unknown session",
            f"No session has the id or name {name!r}.", suggestions=near,
        )  # fmt: skip
    if render.wants_json(request):
        return render.json_response(
            resolution.as_json(), status=300 if resolution.ambiguous else 200
        )
    if resolution.ambiguous:
        context = {**resolution.as_json(), "to": to}
        return await render.page(datasette, request, "resolve.html", context, status=300)
    return Response.redirect(session_href(resolution.id, to))


ROUTES = [
    (r"^/-/capsem/resolve(\.json)?$", resolve),
]
