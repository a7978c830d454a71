"""`/-/capsem/search?q=ID`: where any trace, turn, event, call, ask or message id occurs, and
which session an id or display name names, across every session of the home.

The cross-session index (another module, `services["index"]`) answers for the ledgers it
covers; the ledgers it does not cover are scanned directly within a ledger and time budget
(`graph.search`), and the page says when that scan had to stop early.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from datasette_capsem import errors, permissions
from datasette_capsem.catalog import Session
from datasette_capsem.graph.search import ScanReport, scan_ledgers
from datasette_capsem.graph.values import usable_event_id
from datasette_capsem.state import get_state
from datasette_capsem.views import render
from datasette_capsem.views.session import bad_value, links_for

MAX_QUERY_CHARS = 256
MAX_RESULTS = 500


async def in_thread(fn: Callable, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _session_matches(datasette, value: str) -> list[dict[str, Any]]:
    """Sessions whose id or display name is the value."""
    found = []
    for session in get_state(datasette).catalog.sessions():
        if value in (session.id, session.name):
            match = "id" if session.id == value else "name"
            found.append(
                {
                    **session.summary(),
                    "match": match,
                    "href": links_for(datasette, session).session(),
                }
            )
    return found


async def _index_hits(datasette, value: str) -> tuple[list[dict], set[str], str | None]:
    """Hits from the cross-session index, the sessions it covers, and why it was not used."""
    index = get_state(datasette).index
    try:
        hits = await in_thread(index.lookup, value)
        covered = set(await in_thread(index.covered_sessions))
    except Exception as error:  # an index being rebuilt must not break search
        return [], set(), f"the cross-session index failed: {error}"
    return [dict(hit) for hit in hits], covered, None


def _hit_links(datasette, sessions: dict[str, Session], hit: dict[str, Any]) -> dict[str, Any]:
    session = sessions.get(hit.get("session_id"))
    result = {**hit, "session_name": None, "session_href": None, "href": None, "row": None}
    if session is None:
        return result
    links = links_for(datasette, session)
    value, kind = hit.get("value"), hit.get("id_kind")
    result["session_name"] = session.display_name
    result["session_href"] = links.session()
    result["row"] = links.row(hit.get("table_name") or "", hit.get("row_id"))
    trace_id = hit.get("trace_id") or (value if kind in ("trace_id", "turn_id") else None)
    if kind in ("trace_id", "turn_id") and value:
        result["href"] = links.trace(str(value))
    elif kind in ("event_id", "ask_id") and usable_event_id(hit.get("event_id") or value):
        result["href"] = links.event(str(hit.get("event_id") or value))
    elif trace_id:
        result["href"] = links.trace(str(trace_id))
    result["href"] = result["href"] or result["row"]
    return result


def _dedupe(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, found = set(), []
    for hit in hits:
        key = (hit.get("session_id"), hit.get("id_kind"), hit.get("table_name"), hit.get("row_id"))
        if key not in seen:
            seen.add(key)
            found.append(hit)
    return found


async def _visible(datasette, request, hits: list[dict], sessions: dict) -> list[dict]:
    """Hits in sessions the actor may view (a team instance can restrict databases)."""
    allowed: dict[str, bool] = {}
    found = []
    for hit in hits:
        sid = hit.get("session_id")
        if sid not in allowed:
            session = sessions.get(sid)
            database = get_state(datasette).catalog.database_name(session) if session else sid
            allowed[sid] = await permissions.can_view_database(datasette, request.actor, database)
        if allowed[sid]:
            found.append(hit)
    return found


async def search_page(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    value = (request.args.get("q") or "").strip()
    context: dict[str, Any] = {"q": value, "sessions": [], "hits": [], "index": None, "scan": None}
    if not value:
        return await render.page(datasette, request, "search.html", context)
    problem = bad_value(value, "search value", MAX_QUERY_CHARS)
    if problem:
        raise errors.bad_parameter("Bad search", problem)
    state = get_state(datasette)
    hits, covered, index_problem = await _index_hits(datasette, value)
    sessions = {s.id: s for s in state.catalog.sessions()}
    uncovered = [
        (s.id, s.ledger_path) for s in sessions.values() if s.has_ledger and s.id not in covered
    ]
    scanned, report = await in_thread(_scan, uncovered, value, state.settings.cache_dir)
    found = _dedupe([{**h, "value": value} for h in hits + scanned])
    found = await _visible(datasette, request, found, sessions)
    matches = await _visible(
        datasette,
        request,
        [{**m, "session_id": m["id"]} for m in _session_matches(datasette, value)],
        sessions,
    )
    context.update(
        sessions=matches,
        hits=[_hit_links(datasette, sessions, h) for h in found[:MAX_RESULTS]],
        total_hits=len(found),
        index={"used": index_problem is None, "problem": index_problem, "covered": len(covered)},
        scan=report.to_dict(),
    )
    return await render.page(datasette, request, "search.html", context)


def _scan(ledgers, value: str, cache_dir) -> tuple[list[dict], ScanReport]:
    return scan_ledgers(ledgers, value, cache_dir)


ROUTES = [(r"^/-/capsem/search(?P<format>\.json)?$", search_page)]
