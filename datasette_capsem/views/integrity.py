"""The rule book's verdicts on a session, cached per file version (checks/cache.py).

`integrity` gives the overview's report (the quick profile); `row_verdicts` gives every page
that draws rows (trace graph, events, OTLP) the full profile's findings per row, so no page
decides an integrity rule of its own. Both are kept in memory and, for a stopped session, in the
report store of the plugin's cache, so a restarted server does not run them again (and the
overview finds the quick report the index refresh already computed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from datasette_capsem import readonly
from datasette_capsem.checks import check_session
from datasette_capsem.checks.cache import ROW_VERDICTS_JSON, ReportCache, report_validator
from datasette_capsem.checks.model import NO_VERDICTS, RowVerdicts
from datasette_capsem.checks.profiles import ROWS
from datasette_capsem.mount import ledger_db
from datasette_capsem.state import get_state
from datasette_capsem.versioned_store import CachedEntry, store_key
from datasette_capsem.views.opening import Opened

log = logging.getLogger(__name__)

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


def big_ledger(opened: Opened) -> bool:
    """Whether the session's ledger is big enough for its whole-file runs to go apart
    (`ledger_db.BIG_LEDGER_BYTES`): such a ledger runs the rule book on a connection of its
    own, in a worker thread (a whole-file run takes seconds there, and the mounted file's one
    connection, which the pages of the same ledger queue for, stays free meanwhile), and its
    slow pages answer at once while the run goes on (views/pending.py)."""
    path = ledger_path(opened)
    try:
        return path is not None and path.stat().st_size >= ledger_db.BIG_LEDGER_BYTES
    except OSError:
        return False


def _on_own_connection(path: Path, cache_dir: Path, fn: Callable[[Any], Any]) -> Any:
    conn = readonly.open_readonly(path, cache_dir)
    try:
        return fn(conn)
    finally:
        conn.close()


async def on_ledger(opened: Opened, fn: Callable[[Any], Any]) -> Any:
    """`fn(conn)` for a rule book run over the session's ledger (`fn(None)` without one): on
    the mounted file's connection, or for a big ledger on a read-only connection of its own
    in a worker thread (the request's context, so its policy, goes with it)."""
    if opened.db is None:
        return await asyncio.get_running_loop().run_in_executor(None, fn, None)
    if big_ledger(opened):
        db = opened.db
        return await asyncio.to_thread(_on_own_connection, db.source_path, db.cache_dir, fn)
    return await opened.db.execute_fn(fn)


def ledger_path(opened: Opened) -> Path | None:
    """The ledger file a session's reports are computed from (its mounted file when mounted)."""
    return opened.db.source_path if opened.db is not None else opened.session.ledger_path


def validator(opened: Opened) -> Hashable:
    """What a report depends on besides the clock: the ledger's files and the main.db row."""
    return report_validator(opened.session, ledger_path(opened), opened.links.database)


def _freshness(entry: CachedEntry, cached: bool, profile: str) -> dict[str, Any]:
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
        return await on_ledger(opened, run)

    try:
        stored = store_key(session, ledger_path(opened), profile)
        entry, cached = await report_cache(datasette).get(
            (session.id, profile), validator(opened), compute, stored
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
        "session": session.summary(),  # as the catalog says now (a name may have changed)
        "findings": fired,
        **_freshness(entry, cached, profile),
        "full_check": opened.links.session() + "/check",
    }


def report_held(datasette, opened: Opened, profile: str = OVERVIEW_PROFILE) -> bool:
    """Whether the session's report of `profile` is in memory for the file as it is now."""
    key = (opened.session.id, profile)
    return report_cache(datasette).fresh(key, validator(opened)) is not None


def row_verdicts_held(datasette, opened: Opened) -> bool:
    """Whether the session's row verdicts are in memory for the file as it is now."""
    key = (opened.session.id, ROWS)
    return report_cache(datasette).fresh(key, validator(opened)) is not None


async def row_verdicts(datasette, opened: Opened) -> RowVerdicts:
    """The rule book's findings per row of this session (the `rows` profile: every row check of
    the full one, the file's integrity_check left to the /check page), cached like the
    integrity report while the ledger is unchanged: what the trace graph, event pages and the
    OTLP export show, so no page decides a rule of its own."""
    session = opened.session
    if opened.db is None or opened.problem is not None:
        return NO_VERDICTS

    def run(conn) -> RowVerdicts:
        report = check_session(
            conn,
            session=session,
            live=session.live,
            database=opened.links.database,
            profile=ROWS,
        )
        return report.row_verdicts()

    async def compute() -> RowVerdicts:
        return await on_ledger(opened, run)

    stored = store_key(session, ledger_path(opened), ROWS, ROW_VERDICTS_JSON)
    entry, _ = await report_cache(datasette).get(
        (session.id, ROWS), validator(opened), compute, stored
    )
    return entry.report
