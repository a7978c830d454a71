"""Display names to session ids: the catalog's rule, used by the resolve page and every CLI command.

Everything is keyed by id; a name is only a way in. The rules, in order:

1. A string that is a session's id is that session, whatever other session may be *named*
   like it (a VM named like another session's id, a /run id like `code-3` that is also a
   persistent VM's name, a 1.2 VM's old name-id beside its registry UUID): an id never
   resolves elsewhere, as `/-/capsem/sessions/<id>` never did. The sessions carrying it as
   a name stay candidates (match "name"), so the CLI can say they exist.
2. Otherwise every session carrying the name is a candidate. One candidate resolves;
   several give a chooser page; none gives a 404 with near matches.
3. Only when no id or name matches: a prefix of at least `MIN_PREFIX` characters (ids are
   shown shortened to 8) is a candidate for every session whose id starts with it. One
   resolves, several are ambiguous (a chooser, never a guess). The CLI and the URLs both
   ask here, so a prefix means the same session everywhere.

With labelled homes a session's id is its address `<label>--<id>` (rule 1 as above; the CLI
also takes `LABEL:ID`). A bare id is the session of that id in whichever home has it: in
exactly one home it resolves there, in several it is ambiguous and every home's session is a
candidate (a chooser, never a guess): a home added later can turn a bare id ambiguous, but
never changes what an address means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from datasette_capsem.catalog.catalog import Catalog, CatalogSnapshot
from datasette_capsem.catalog.models import Session
from datasette_capsem.config import qualify
from datasette_capsem.urls import Urls

MIN_PREFIX = 8


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


def candidate(session: Session, match: str) -> dict[str, Any]:
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
        "href": Urls().session(session.id),  # root-relative; pages prefix their base_url
        **({"home": session.home, "local_id": session.short_id} if session.home else {}),
    }


def _address(snapshot: CatalogSnapshot, name: str) -> str:
    """`LABEL:ID` of a known label, as its address `LABEL--ID`; anything else unchanged."""
    label, colon, rest = name.partition(":")
    return qualify(label, rest) if colon and rest and label in snapshot.homes else name


def _same_id(snapshot: CatalogSnapshot, name: str, sessions: dict[str, Session]):
    """(the session `name` is the id of, the other homes' sessions with that bare id)."""
    by_id = sessions.get(name)
    if by_id is not None or not snapshot.homes:
        return by_id, []
    homes = snapshot.by_local_id.get(name, [])
    if len(homes) == 1:
        return homes[0], []
    return None, sorted(homes, key=lambda s: s.id)


def resolve_name(catalog: Catalog, name: str) -> Resolution:
    """Apply the rules of the module docstring against the current catalog."""
    snapshot = catalog.snapshot()
    sessions = snapshot.sessions
    name = _address(snapshot, name)
    by_id, in_homes = _same_id(snapshot, name, sessions)
    named = [s for s in snapshot.by_name.get(name, ()) if s is not by_id]
    named = [s for s in named if s not in in_homes]
    named.sort(key=lambda s: (s.created_at or "", s.id), reverse=True)
    candidates = ([candidate(by_id, "id")] if by_id else []) + [
        candidate(s, "id") for s in in_homes
    ]
    candidates += [candidate(s, "name") for s in named]
    if in_homes:
        return Resolution(name=name, candidates=candidates)
    if not candidates and len(name) >= MIN_PREFIX:
        prefixed = snapshot.with_id_prefix(name)
        prefixed.sort(key=lambda s: (s.created_at or "", s.id), reverse=True)
        candidates = [candidate(s, "prefix") for s in prefixed]
        if len(prefixed) == 1:
            return Resolution(name=name, id=prefixed[0].id, candidates=candidates)
    resolution = Resolution(name=name, candidates=candidates)
    if by_id is not None:
        resolution.id = by_id.id
    elif by_id is None and len(named) == 1:
        resolution.id = named[0].id
    return resolution
