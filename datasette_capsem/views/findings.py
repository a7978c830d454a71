"""`/-/capsem/findings` (+ `.json`): every integrity finding kind across sessions.

Read from the cross-session index (`session_checks`, `session_findings`), which the background
refresh fills with the quick check profile's verdict of each session (index/verdicts.py): no
check runs on request. Each kind lists the sessions it hits, newest first, names beside ids,
each linking to the finding on the session's check page. Sessions whose ledger cannot be
read are listed apart with the reason: they have no findings, and count as errors here as in
the list's "with errors" filter.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlencode

from datasette_capsem import errors, permissions
from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import render


def finding_anchor(kind: str) -> str:
    """The id of a finding kind's row on the check page (templates/capsem/check.html)."""
    return f"finding-{kind}"


async def findings_page(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    state = get_state(datasette)
    kinds = await asyncio.get_running_loop().run_in_executor(None, state.index.findings)
    urls = Urls.of(datasette)
    catalog = state.catalog.snapshot().sessions
    for kind in kinds:
        kind["list_href"] = urls.plugin() + "?" + urlencode({"has_finding": kind["kind"], "all": 1})
        for hit in kind["hits"]:
            session = catalog.get(hit["session_id"])
            name = session.display_name if session is not None else hit["session_name"]
            hit["session_name"] = name if name != hit["session_id"] else None
            hit["session_href"] = urls.session(hit["session_id"])
            hit["href"] = urls.check(hit["session_id"]) + "#" + finding_anchor(kind["kind"])
    freshness = state.index.freshness()
    context = {
        "kinds": kinds,
        "unreadable": _unreadable(state, urls, catalog),  # read with the findings
        "errors_href": urls.plugin() + "?" + urlencode({"has_errors": 1, "all": 1}),
        "sessions_checked": freshness["sessions_checked"],
        "index": freshness,
        "profile": "quick",
    }
    return await render.page(datasette, request, "findings.html", context)


def _unreadable(state, urls: Urls, catalog) -> list[dict]:
    """Sessions whose stored verdict is 'unreadable', newest first, with the reason (an
    indexed read of the stored verdicts, not a pass over every session)."""
    found = []
    for stored in state.index.unreadable():
        session_id = stored["session_id"]
        session = catalog.get(session_id)
        name = session.display_name if session is not None else None
        found.append(
            {
                "session_id": session_id,
                "session_name": name if name != session_id else None,
                "session_kind": session.kind if session is not None else stored["session_kind"],
                "created_at": session.created_at if session is not None else stored["created_at"],
                "problem": stored.get("problem") or "unreadable",
                "href": urls.session(session_id),
            }
        )
    found.sort(key=lambda u: (u["created_at"] or "", u["session_id"]), reverse=True)
    return found


ROUTES = [(r"^/-/capsem/findings(?P<format>\.json)?$", findings_page)]
