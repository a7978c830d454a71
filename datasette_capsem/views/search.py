"""`/-/capsem/search?q=…`: text and ids across every session of the home.

* **Text**: ranked full-text hits from the cross-session index (index/fts.py, index/text.py),
  each with a highlighted snippet (plain text parts, escaped by the template), the session
  (name beside id), the row's kind and time, and a link to its event, trace or row page.
  Filters: `kind` (repeatable), `session` (repeatable), `provider`, `model`, `since`,
  `until`; pages with `_size` and `_next`. The indexed text is masked by the credential policy
  for everyone, so search is never an oracle for secrets; with `hide_free_text`, an actor who
  may not see secrets searches only the kinds that are not free text (files, HTTP, DNS,
  security).
* **Ids**: where any trace, turn, event, call, ask or message id occurs, and which session an
  id or display name names. The index answers for the ledgers it covers; the ledgers it does
  not cover are scanned directly within a ledger and time budget (`session.search`), and the
  page says when that scan had to stop early.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from datasette_capsem import errors, permissions, redaction
from datasette_capsem.catalog import Session
from datasette_capsem.graph.exchanges import is_ambient
from datasette_capsem.graph.values import usable_event_id
from datasette_capsem.index import fts
from datasette_capsem.index.text import KINDS
from datasette_capsem.session.search import ScanReport, scan_ledgers
from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import render
from datasette_capsem.views.opening import bad_value, links_for

MAX_QUERY_CHARS = 256
MAX_RESULTS = 500
DEFAULT_TEXT_PAGE = 50
# Kinds whose text is not free text under the policy (paths, domains, names, rule ids): what
# an actor without view_secrets may search when the operator sets `hide_free_text`.
NOT_FREE_TEXT_KINDS = ("file", "http", "dns", "security")
_WHEN = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?Z?)?")
_PAGE = "_size must be an integer from 1 to 200, _next an integer from 0"


async def in_thread(fn: Callable, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _session_matches(datasette, value: str) -> list[dict[str, Any]]:
    """Sessions whose id or display name is the value, newest first."""
    found = []
    snapshot = get_state(datasette).catalog.snapshot()
    # By id, by the same id in every home (short_id), by name: lookups, not a pass.
    named = list(
        {
            s.id: s
            for s in [
                *([snapshot.sessions[value]] if value in snapshot.sessions else []),
                *snapshot.by_local_id.get(value, []),
                *snapshot.by_name.get(value, []),
            ]
        }.values()
    )
    for session in sorted(named, key=lambda s: (s.created_at or "", s.id), reverse=True):
        match = "id" if value in (session.id, session.short_id) else "name"
        found.append(
            {**session.summary(), "match": match, "href": links_for(datasette, session).session()}
        )
    return found


async def _index_hits(datasette, value: str) -> tuple[list[dict], int, str | None]:
    """Hits from the cross-session index (one indexed lookup), how many sessions it covers,
    and why it was not used."""
    index = get_state(datasette).index
    try:
        hits = await in_thread(index.lookup, value)
        covered = len(index.snapshot().covered)
    except Exception as error:  # an index being rebuilt must not break search
        return [], 0, f"the cross-session index failed: {error}"
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


def _text_filters(request) -> tuple[fts.TextFilters, int, int]:
    """The text filters and page of a request, or a 400 saying what is wrong."""
    args = request.args
    try:
        kinds = fts.check_kinds([k for k in args.getlist("kind") if k])
    except ValueError as error:
        raise errors.bad_parameter("Bad search filter", str(error)) from error
    # `within` is `session` under a name the credential masker does not read as a token, for
    # the links of the hits-per-session table (every response is masked for a viewer).
    sessions = tuple(
        dict.fromkeys(s for s in [*args.getlist("session"), *args.getlist("within")] if s)
    )
    for name in ("since", "until"):
        value = args.get(name)
        if value and not _WHEN.fullmatch(value):
            raise errors.bad_parameter(
                "Bad search filter", f"{name} must be a date (2026-07-01) or an ISO time."
            )
    for name in ("provider", "model", *(["session", "within"] if sessions else [])):
        for value in args.getlist(name):
            problem = bad_value(value, name) if value else None
            if problem:
                raise errors.bad_parameter("Bad search filter", problem)
    raw_size, raw_next = args.get("_size") or str(DEFAULT_TEXT_PAGE), args.get("_next") or "0"
    if not (raw_size.isdigit() and raw_next.isdigit()) or len(raw_size + raw_next) > 12:
        raise errors.bad_parameter("Bad pagination", _PAGE)
    size, offset = int(raw_size), int(raw_next)
    if not 1 <= size <= fts.MAX_LIMIT:
        raise errors.bad_parameter("Bad pagination", _PAGE)
    filters = fts.TextFilters(
        kinds=kinds,
        sessions=sessions,
        provider=args.get("provider") or None,
        model=args.get("model") or None,
        since=(args.get("since") or "").replace(" ", "T") or None,
        until=(args.get("until") or "").replace(" ", "T") or None,
    )
    return filters, size, offset


def _text_href(links, hit: dict[str, Any]) -> str | None:
    """The event page of a row with an event id, else its trace (an ambient model call's own
    exchange), else its row page."""
    if usable_event_id(hit.get("event_id")):
        return links.event(str(hit["event_id"]))
    trace_id = hit.get("trace_id")
    if trace_id:
        call = hit.get("model_call_id")
        if is_ambient(str(trace_id)) and call is not None and hit["table_name"] == "model_calls":
            return links.exchange(str(trace_id), int(call))
        return links.trace(str(trace_id))
    return links.row(hit.get("table_name") or "", hit.get("row_id"))


async def _text_search(datasette, request, value: str) -> dict[str, Any]:
    """The text part of the page: hits, totals, filters, next page."""
    filters, size, offset = _text_filters(request)
    restricted = redaction.hide_free_text.get()
    if restricted:
        filters = fts.TextFilters(**{**filters.__dict__, "kinds": text_kinds(filters.kinds)})
    state = get_state(datasette)
    try:
        result = await in_thread(
            lambda: state.index.search_text(value, filters, limit=size, offset=offset)
        )
    except fts.QuerySyntaxError as error:
        raise errors.bad_parameter("Bad search syntax", str(error)) from error
    sessions = state.catalog.snapshot().sessions
    visible = await _visible(datasette, request, result.hits, sessions)
    hits = []
    for hit in visible:
        session = sessions.get(hit["session_id"])
        if session is None:
            continue
        links = links_for(datasette, session)
        hit.pop("rank", None)
        hits.append(
            {
                **hit,
                "session_name": session.display_name,
                "session_href": links.session(),
                "href": _text_href(links, hit),
                "row": links.row(hit.get("table_name") or "", hit.get("row_id")),
            }
        )
    # A bounded prefix search pages through the matches it ranked, not through every match.
    pageable = min(result.total, result.ranked) if result.partial else result.total
    next_offset = offset + size if offset + size < pageable else None
    next_url = None
    urls = Urls.of(datasette)
    if next_offset is not None:  # the JSON's next page is JSON, the page's a page
        query = [(k, v) for k in request.args for v in request.args.getlist(k) if k != "_next"]
        path = "/search.json" if render.wants_json(request) else "/search"
        query = [(k, v) for k, v in query if k != "_format"]
        next_url = f"{urls.plugin(path)}?{urlencode([*query, ('_next', next_offset)])}"
    grouped = await _sessions_of_hits(datasette, request, value, filters, sessions)
    index = state.index.freshness()
    return {
        "available": index["ready"] and index["ledgers_indexed"] > 0,
        "fts_query": result.fts_query,
        "hits": hits,
        "total": result.total,
        "total_capped": result.total_capped,
        "partial": result.partial,  # ranked among the first `ranked` matches only
        "ranked": result.ranked,
        "offset": offset,
        "size": size,
        "next": next_url,
        "sessions": grouped["sessions"],
        "session_count": len(grouped["sessions"]),
        "sessions_capped": grouped["capped"],
        "list_href": _list_href(urls, value, filters),
        "narrowing": _narrowing(request),
        "filters": {
            "kind": list(filters.kinds) if not restricted else list(filters.kinds),
            "session": list(filters.sessions),
            "provider": filters.provider,
            "model": filters.model,
            "since": filters.since,
            "until": filters.until,
        },
        "kinds": list(NOT_FREE_TEXT_KINDS if restricted else KINDS),
        "restricted": restricted,
        "masked": True,
    }


def text_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The kinds a text query may search for the current reader: with `hide_free_text`, an
    actor who may not see secrets searches only kinds that are not free text."""
    if not redaction.hide_free_text.get():
        return kinds
    allowed = [k for k in (kinds or NOT_FREE_TEXT_KINDS) if k in NOT_FREE_TEXT_KINDS]
    return tuple(allowed) or ("none",)


def _list_href(urls: Urls, value: str, filters: fts.TextFilters) -> str:
    """The session list filtered to the sessions a text query's hits are in (`matching`, and
    the kinds searched as `matching_kind`; the list's own filters do the rest)."""
    pairs = [("matching", value), *(("matching_kind", k) for k in filters.kinds if k != "none")]
    return f"{urls.plugin('')}?{urlencode(pairs)}"


async def _sessions_of_hits(datasette, request, value, filters, sessions) -> dict[str, Any]:
    """The hits grouped by session (the sessions the actor may view), most hits first."""
    state = get_state(datasette)
    counts = await in_thread(lambda: state.index.text_sessions(value, filters))
    found = []
    for row in await _visible(datasette, request, counts.sessions, sessions):
        session = sessions.get(row["session_id"])
        if session is None:
            continue
        found.append(
            {
                **row,
                "session_name": session.display_name,
                "session_href": links_for(datasette, session).session(),
            }
        )
    return {"sessions": found, "capped": counts.capped}


def _narrowing(request) -> str:
    """This search's query string without its session filter and page: the template appends
    `within=ID` to narrow it to one session (not `session=`, which the masker reads as a
    credential)."""
    query = [
        (k, v)
        for k in request.args
        for v in request.args.getlist(k)
        if k not in ("_next", "session", "within", "_format")
    ]
    return urlencode(query)


async def search_page(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    value = (request.args.get("q") or "").strip()
    context: dict[str, Any] = {
        "q": value,
        "sessions": [],
        "hits": [],
        "index": None,
        "scan": None,
        "text": None,
        "all_kinds": list(KINDS),
        "args": {k: request.args.getlist(k) for k in request.args},
    }
    if not value:
        return await render.page(datasette, request, "search.html", context)
    problem = bad_value(value, "search value", MAX_QUERY_CHARS)
    if problem:
        raise errors.bad_parameter("Bad search", problem)
    context["text"] = await _text_search(datasette, request, value)
    if any(c.isspace() for c in value) or int(request.args.get("_next") or 0):
        # Ids have no spaces, and the id part is shown on the first page only.
        return await render.page(datasette, request, "search.html", context)
    found, covered, index_problem, report = await id_hits(datasette, request, value)
    sessions = get_state(datasette).catalog.snapshot().sessions
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
        index={"used": index_problem is None, "problem": index_problem, "covered": covered},
        scan=report.to_dict(),
    )
    return await render.page(datasette, request, "search.html", context)


async def id_hits(datasette, request, value: str) -> tuple[list[dict], int, str | None, ScanReport]:
    """Where an id occurs, in the sessions the actor may view: the index's rows and a scan of
    the ledgers it does not cover (deduplicated); how many sessions the index covers, why it
    was not used, and what the scan covered."""
    state = get_state(datasette)
    hits, covered, index_problem = await _index_hits(datasette, value)
    catalog = state.catalog.snapshot()
    sessions = catalog.sessions
    if index_problem is None:
        uncovered = state.index.uncovered_ledgers(catalog)
    else:
        uncovered = [(s.id, s.ledger_path) for s in sessions.values() if s.has_ledger]
    refreshing = state.index.freshness()["refreshing"]
    limit = SCAN_LEDGERS_WHILE_REFRESHING if refreshing else SCAN_LEDGERS
    scanned, report = await in_thread(_scan, uncovered, value, state.settings.cache_dir, limit)
    found = _dedupe([{**h, "value": value} for h in hits + scanned])
    return await _visible(datasette, request, found, sessions), covered, index_problem, report


# The direct scan of ledgers the index does not cover yet (new ones, or all of them while a
# first build runs): the newest this many per request, within the scan's time budget; the
# page says how many it skipped. A home of 100,000 sessions mid-build has 30,000 such ledgers.
# While the index is being refreshed (a first build has them all), only the newest few.
SCAN_LEDGERS = 100
SCAN_LEDGERS_WHILE_REFRESHING = 10


def _scan(ledgers, value: str, cache_dir, limit: int) -> tuple[list[dict], ScanReport]:
    return scan_ledgers(ledgers, value, cache_dir, max_ledgers=limit)


ROUTES = [(r"^/-/capsem/search(?P<format>\.json)?$", search_page)]
