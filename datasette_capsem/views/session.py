"""`/-/capsem/sessions/<id>`: one session at a glance, and the helpers every session page uses.

The overview answers "what is in this session and is it sound": identity, status, era, row
counts, providers, the integrity verdict and the traces, newest first. A session whose ledger
is gone (a stopped ephemeral VM, spec §1.4) or unreadable still gets its page, from main.db.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote, urlencode

from datasette_capsem import errors, permissions
from datasette_capsem.catalog import Session
from datasette_capsem.catalog.resolve import resolve_name
from datasette_capsem.checks import check_session
from datasette_capsem.checks.cache import CachedReport, ReportCache
from datasette_capsem.checks.model import NO_VERDICTS, RowVerdicts
from datasette_capsem.errors import CapsemError, Redirect
from datasette_capsem.graph import follow, overview, stats
from datasette_capsem.graph.exchanges import is_ambient
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.mount.ledger_db import LedgerDatabase
from datasette_capsem.readonly import LedgerUnavailable, file_fingerprint
from datasette_capsem.state import get_state
from datasette_capsem.urls import SessionUrls, Urls
from datasette_capsem.views import render

log = logging.getLogger(__name__)

MAX_ID_CHARS = 256
DEFAULT_TRACE_PAGE = 50
MAX_TRACE_PAGE = 1000
MAX_OFFSET = 10**9
FOLLOW_POLL_SECONDS = 3
PAGE_PROBLEM = "_size must be an integer from 1 to 1000 (or 'max'), _next an integer from 0"


@dataclass
class Opened:
    """A session resolved from a URL, with its mounted ledger when it has one."""

    session: Session
    links: SessionUrls
    db: LedgerDatabase | None = None
    schema: LedgerSchema | None = None
    problem: LedgerUnavailable | None = None


def url_value(request, name: str) -> str:
    """A path variable, percent-decoded (Datasette routes on the raw path)."""
    return unquote(request.url_vars.get(name) or "")


def bad_value(value: str, what: str, max_chars: int = MAX_ID_CHARS) -> str | None:
    """Why an id from a URL cannot be looked up, or None when it can."""
    if not value:
        return f"The {what} is empty."
    if "\x00" in value:
        return f"The {what} contains a NUL byte."
    if len(value) > max_chars:
        return f"The {what} is {len(value)} characters long; ids are at most {max_chars}."
    return None


def page_bounds(request) -> tuple[int, int] | str:
    """(offset, size) from Datasette-style `_next` and `_size`, or why they are unusable."""
    raw_size = request.args.get("_size") or str(DEFAULT_TRACE_PAGE)
    raw_next = request.args.get("_next") or "0"
    if raw_size == "max":
        raw_size = str(MAX_TRACE_PAGE)
    if not (raw_size.isdigit() and raw_next.isdigit()) or len(raw_size) + len(raw_next) > 20:
        return PAGE_PROBLEM
    size, offset = int(raw_size), int(raw_next)
    if not 1 <= size <= MAX_TRACE_PAGE or offset > MAX_OFFSET:
        return PAGE_PROBLEM
    return offset, size


def links_for(datasette, session: Session) -> SessionUrls:
    database = get_state(datasette).catalog.database_name(session)
    return Urls.of(datasette).for_session(session.id, database)


async def unknown_session(datasette, request, value: str, *, suggest: bool = True) -> CapsemError:
    """404 for an id no session has (or one the actor may not view: the same answer)."""
    near = []
    if suggest:  # only sessions the actor may view: a suggestion confirms an id exists
        for session in get_state(datasette).catalog.near_matches(value):
            if await permissions.can_view_database(
                datasette, request.actor, links_for(datasette, session).database
            ):
                near.append(session)
    near = render.session_links(datasette, near)
    return errors.not_found("Unknown session", f"No session has the id {value!r}.", near)


async def open_session(datasette, request, *, need_ledger: bool) -> Opened:
    """Resolve `session_id` from the URL through the catalog (never as a path); raise a
    `CapsemError` (or a `Redirect` for a display name) when it names no viewable session."""
    value = url_value(request, "session_id")
    problem = bad_value(value, "session id")
    if problem:
        raise errors.bad_parameter("Bad session id", problem)
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    catalog = get_state(datasette).catalog
    session = catalog.get(value)
    if session is None:
        raise await _by_name(datasette, request, value)
    opened = Opened(session, links_for(datasette, session))
    if not await permissions.can_view_database(datasette, request.actor, opened.links.database):
        # As if it did not exist: a 403 here would confirm the id.
        raise await unknown_session(datasette, request, value, suggest=False)
    if not session.has_ledger:
        if need_ledger:
            raise render.no_ledger(datasette, session)
        return opened
    try:
        opened.db = await get_state(datasette).mounter.session_database(session)
        opened.schema = await opened.db.ledger_schema()
    except LedgerUnavailable as error:
        if need_ledger:
            raise errors.unreadable(error, f"The ledger of session {session.id}") from error
        opened.problem, opened.db, opened.schema = error, None, None
    return opened


async def _by_name(datasette, request, value: str) -> CapsemError | Redirect:
    """A display name in the URL: redirect to the one session it names, else explain."""
    resolution = resolve_name(get_state(datasette).catalog, value)
    if resolution.id:
        session = get_state(datasette).catalog.get(resolution.id)
        database = links_for(datasette, session).database
        if not await permissions.can_view_database(datasette, request.actor, database):
            return await unknown_session(datasette, request, value, suggest=False)
        return _redirect_to_id(request, datasette, session)
    if not resolution.ambiguous:
        return await unknown_session(datasette, request, value)
    # A chooser, never a guess: only the candidates this actor may view are offered.
    urls, rest = Urls.of(datasette), _rest_of_path(request)
    offered = []
    for found in resolution.candidates:
        session = get_state(datasette).catalog.get(found["id"])
        if session is None or not await permissions.can_view_database(
            datasette, request.actor, links_for(datasette, session).database
        ):
            continue
        offered.append({"id": found["id"], "name": found["name"],
                        "href": urls.session(found["id"]) + rest})  # fmt: skip
    if not offered:
        return await unknown_session(datasette, request, value, suggest=False)
    what = "start with" if resolution.candidates[0]["match"] == "prefix" else "are called"
    return errors.CapsemError(
        300,
        "Ambiguous session",
        f"Several sessions {what} {value!r}; pick one by its id.",
        offered,
    )


def _rest_of_path(request) -> str:
    """What follows `/sessions/<id>` in the raw path (e.g. `/traces/abc`), kept encoded."""
    raw_id = request.url_vars.get("session_id") or ""
    raw = request.scope.get("raw_path") or request.path.encode("utf-8")
    raw = raw.decode("latin-1").partition("?")[0]
    marker = "/sessions/" + raw_id
    return raw[raw.find(marker) + len(marker) :] if marker in raw else ""


def _redirect_to_id(request, datasette, session: Session) -> Redirect:
    """A display name in the URL: send the reader to the id, which is what selects data."""
    rest = _rest_of_path(request)
    query = request.query_string
    target = links_for(datasette, session).session() + rest
    return Redirect(target + (f"?{query}" if query else ""))


# -- integrity ---------------------------------------------------------------------------

# The overview runs the quick check profile on every view; the /check page runs the full one.
OVERVIEW_PROFILE = "quick"
PROFILE_NOTES = {
    "quick": "Quick check: SQLite's quick_check instead of integrity_check (index contents "
    "are not compared with their tables), and stored bodies are not hashed. The full check "
    "does both.",
    "full": "Full check: SQLite's integrity_check and a blake3 of every stored body.",
}


def report_cache(datasette) -> ReportCache:
    """The report cache of this Datasette instance."""
    return get_state(datasette).reports


def _validator(opened: Opened) -> Hashable:
    """What a report depends on besides the clock: the ledger's files and the main.db row."""
    session = opened.session
    path = opened.db.source_path if opened.db is not None else session.ledger_path
    files = file_fingerprint(path) if path is not None else None
    row = session.main_row
    return (files, session.live, tuple(dict(row).items()) if row is not None else None)


def _freshness(entry: CachedReport, cached: bool, profile: str) -> dict[str, Any]:
    computed = datetime.fromtimestamp(entry.computed_at, tz=timezone.utc)
    return {
        "profile": profile,
        "profile_note": PROFILE_NOTES[profile],
        "computed_at": computed.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "age_seconds": round(max(0.0, time.time() - entry.computed_at), 1),
        "cached": cached,
    }


async def integrity(
    datasette,
    opened: Opened,
    *,
    profile: str = OVERVIEW_PROFILE,
    counts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The check engine's verdict (its findings that fired), or why there is none.

    The report is cached per session and profile while the ledger is unchanged (see
    `ReportCache`); `counts` are the row counts the page already read, so the checks do not
    count the tables again.
    """
    if opened.problem is not None:
        message = f"the ledger cannot be read ({opened.problem.kind})"
        return {"available": False, "verdict": "error", "message": message}
    session = opened.session

    def run(conn):
        return check_session(
            conn,
            session=session,
            main_row=session.main_row,
            live=session.live,
            database=opened.links.database,
            profile=profile,
            tables=counts if conn is not None else None,
        ).to_dict()

    async def compute() -> dict[str, Any]:
        if opened.db is not None:
            return await opened.db.execute_fn(run)
        return await asyncio.get_running_loop().run_in_executor(None, run, None)

    try:
        entry, cached = await report_cache(datasette).get(
            (session.id, profile), _validator(opened), compute
        )
    except Exception as error:  # another module's bug must not take the page down
        log.exception("integrity checks failed for %s", session.id)
        return {"available": False, "verdict": None, "message": f"checks failed: {error}"}
    report = entry.report
    fired = [f for f in report.get("findings", []) if f.get("count") or f.get("failed")]
    return {
        "available": True,
        "message": None,
        **report,
        "findings": fired,
        **_freshness(entry, cached, profile),
        "full_check": opened.links.session() + "/check",
    }


async def row_verdicts(datasette, opened: Opened) -> RowVerdicts:
    """The rule book's findings per row of this session (the full profile), cached like the
    integrity report while the ledger is unchanged: what the trace graph, event pages and the
    OTLP export show, so no page decides a rule of its own."""
    session = opened.session
    if opened.db is None or opened.problem is not None:
        return NO_VERDICTS

    def run(conn) -> RowVerdicts:
        report = check_session(
            conn, session=session, live=session.live, database=opened.links.database
        )
        return report.row_verdicts()

    async def compute() -> RowVerdicts:
        return await opened.db.execute_fn(run)

    entry, _ = await report_cache(datasette).get((session.id, "rows"), _validator(opened), compute)
    return entry.report


# -- following a live ledger ------------------------------------------------------------


async def recent(datasette, opened: Opened, live: bool) -> tuple[follow.Recent, float]:
    """The newest rows of the session's ledger, read once per file version and interval
    however many followers ask (graph.follow.FollowCache). `live` is taken before the
    fingerprint: once the writer is gone, the read is of its last version, never older."""
    schema, db = opened.schema, opened.db

    async def compute() -> follow.Recent:
        return await db.execute_fn(lambda conn: follow.recent_rows(conn, schema))

    fingerprint = file_fingerprint(db.source_path)
    cache = get_state(datasette).follow
    return await cache.get(opened.session.id, fingerprint, compute, final=not live)


def is_live(datasette, opened: Opened) -> bool:
    """Live now: a non-empty -wal, or main.db's row (re-read when main.db changed) says running."""
    session = get_state(datasette).catalog.get(opened.session.id) or opened.session
    path = opened.db.source_path if opened.db is not None else session.ledger_path
    return follow.is_live(path, session.status)


async def follow_context(
    datasette, opened: Opened, trace_id: str | None = None
) -> dict[str, Any] | None:
    """The live panel of the overview (or of one trace's page, `trace_id`), None unless the
    session is being written: where the ledger stands, so the page's poller asks only for
    what comes after."""
    if opened.db is None or not is_live(datasette, opened):
        return None
    held, _ = await recent(datasette, opened, True)
    return {
        "live": True,
        "cursor": follow.format_cursor(held.cursor),
        "delta_url": opened.links.session()
        + "/delta.json"
        + (f"?{urlencode({'trace_id': trace_id})}" if trace_id else ""),
        "tail_url": opened.links.session() + "/tail",
        "poll_seconds": FOLLOW_POLL_SECONDS,
        "rows": [],
        "gap": False,
    }


# -- the overview page -------------------------------------------------------------------


def _overview_data(opened: Opened, offset: int, size: int):
    schema = opened.schema

    def read(conn) -> dict[str, Any]:
        return {
            "counts": overview.table_counts(conn, schema),
            "providers": overview.providers(conn, schema),
            "traces": overview.traces_page(conn, schema, offset, size),
            "ambient_traces": overview.ambient_traces(conn, schema),
            "mcp_rows": overview.legacy_mcp_rows(conn, schema),
            "stats": stats.session_stats(conn, schema),
        }

    return read


def _era_notes(schema: LedgerSchema) -> list[str]:
    notes = []
    if not schema.has("model_calls", "event_id"):
        notes.append("This file predates event ids (2026-06-06): no security or body joins.")
    if "model_items" not in schema.tables:
        notes.append("This file predates model_items (2026-06-14).")
    if "mcp_calls" in schema.tables:
        notes.append("MCP calls of this file live in the legacy mcp_calls table (shown below).")
    if schema.legacy_tables:
        notes.append("Legacy tables present: " + ", ".join(schema.legacy_tables) + ".")
    return notes


def _trace_links(opened: Opened, traces: list[dict]) -> list[dict]:
    for trace in traces:
        trace_id, exchange = str(trace["trace_id"]), trace.get("exchange")
        trace["ambient"] = is_ambient(trace_id)
        trace["href"] = (
            opened.links.exchange(trace_id, exchange)
            if exchange is not None
            else opened.links.trace(trace_id)
        )
    return traces


def _stats_links(opened: Opened, sections: list[dict]) -> list[dict]:
    """Each figure of the summaries links to the rows it counts (Datasette's table page with
    the figure's filters); each latest row to its row page."""
    links = opened.links
    for section in sections:
        for figure in section["figures"]:
            figure["href"] = links.table(figure["table"], **figure["filters"])
        for group in section["groups"]:
            for row in group["rows"]:
                row["href"] = links.table(row["table"], **row["filters"])
        for listing in section["lists"]:
            for row in listing["rows"]:
                row["href"] = links.row(listing["table"], row["id"])
    return sections


def _base_context(opened: Opened, offset: int, size: int) -> dict[str, Any]:
    """What the page shows from the catalog alone (main.db row, registry, paths)."""
    session = opened.session
    return {
        "session": session.summary(),
        "display_name": session.display_name,
        "main_row": dict(session.main_row) if session.main_row is not None else None,
        "links": {"session": opened.links.session(), "database": opened.links.database_url()},
        "ledger": str(session.ledger_path) if session.ledger_path else None,
        "problem": f"{opened.problem.kind}: {opened.problem.detail}" if opened.problem else None,
        "era": None,
        "schema": None,
        "notes": [],
        "counts": {},
        "providers": [],
        "traces": [],
        "traces_total": 0,
        "ambient_traces": [],
        "mcp_rows": [],
        "stats": [],
        "offset": offset,
        "size": size,
        "next": None,
    }


async def _ledger_context(opened: Opened, offset: int, size: int) -> dict[str, Any]:
    """What the page shows from the ledger: counts, providers, traces, legacy MCP rows."""
    data = await opened.db.execute_fn(_overview_data(opened, offset, size))
    traces = data.pop("traces")
    _trace_links(opened, data["ambient_traces"])
    _stats_links(opened, data["stats"])
    return {
        **data,
        "era": opened.schema.era,
        "schema": opened.schema.summary(),
        "notes": _era_notes(opened.schema) + traces["notes"],
        "traces": _trace_links(opened, traces["traces"]),
        "traces_total": traces["total"],
        "turns": traces.get("turns", 0),
        "exchanges": traces.get("exchanges", 0),
        "next": offset + size if offset + size < traces["total"] else None,
    }


async def session_page(datasette, request):
    opened = await open_session(datasette, request, need_ledger=False)
    bounds = page_bounds(request)
    if isinstance(bounds, str):
        raise errors.bad_parameter("Bad pagination", bounds)
    offset, size = bounds
    context = _base_context(opened, offset, size)
    if opened.db is not None:
        context.update(await _ledger_context(opened, offset, size))
    elif not opened.session.has_ledger:
        context["notes"].append(
            "No session.db on disk: Capsem deletes the directory of a stopped ephemeral "
            "session, so main.db's row is all that remains."
        )
    context["integrity"] = await integrity(datasette, opened, counts=context["counts"] or None)
    context["follow"] = await follow_context(datasette, opened)
    return await render.page(datasette, request, "session.html", context)


ROUTES = [
    (r"^/-/capsem/sessions/(?P<session_id>[^/]+?)(?P<format>\.json)?$", session_page),
]
