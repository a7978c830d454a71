"""Run every registered check against one session and collect a Report.

`check_session` is synchronous on purpose: Datasette runs it in a SQL thread through
`execute_fn`, and the CLI calls it directly on a connection from `readonly.open_readonly`.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from datasette_capsem.catalog.catalog import session_database_name
from datasette_capsem.checks import fused
from datasette_capsem.checks.model import DEFAULT_SAMPLE_LIMIT, Check, CheckContext, Finding, Report
from datasette_capsem.checks.profiles import for_profile, judges_file_alone
from datasette_capsem.findings import KINDS
from datasette_capsem.ledger.bodies import hash_verdict
from datasette_capsem.ledger.dialect import render_sql
from datasette_capsem.ledger.schema import LEDGER_TABLES, LedgerSchema, read_schema
from datasette_capsem.plugins import collect, plugin_manager
from datasette_capsem.readonly import LedgerUnavailable

# Tables whose row counts a report shows (check_session.py's five first).
COUNTED_TABLES = LEDGER_TABLES
KIND_ORDER = {kind: index for index, kind in enumerate(KINDS)}
# Page cache while the checks run: SQLite's own default (2 MB), as the sqlite3 shell has.
# Connections keep a smaller one for their lifetime (readonly.CACHE_KIB, bounding memory over
# many open ledgers); with it integrity_check of a 1M-row ledger was ~15 % slower.
CHECK_CACHE_KIB = 2000


def all_checks() -> list[Check]:
    """Every registered check, in the order of spec §6.2 (plugins' own kinds last)."""
    checks = collect("capsem_checks", "id")
    return sorted(checks, key=lambda c: (KIND_ORDER.get(c.kind, len(KIND_ORDER)), c.id))


def body_hash_verdict(body: Any, body_hash: Any, truncated: Any) -> str:
    """capsem_body_hash_verdict(body, body_hash, truncated) for SQL: verified, mismatch or
    unverifiable. The very function the trace graph and the event and body pages use
    (`ledger.bodies.hash_verdict`), so the check and the pages always give the same verdict."""
    return hash_verdict(body, body_hash, truncated)


def prepare_connection(conn: sqlite3.Connection) -> None:
    """SQL functions checks may use. Registering a function never writes to the file."""
    conn.create_function("capsem_body_hash_verdict", 3, body_hash_verdict, deterministic=True)


def database_name_for(session: Any) -> str | None:
    """The Datasette database name the catalog gives a session (for links)."""
    if session is None:
        return None
    return session_database_name(session)


def table_counts(conn: sqlite3.Connection, schema: LedgerSchema) -> dict[str, int]:
    """Rows of each of COUNTED_TABLES the file has: one statement for all of them (preparing
    a statement costs more than counting a small table), else one per table, leaving out a
    table SQLite cannot count."""
    present = [table for table in COUNTED_TABLES if table in schema.tables]
    if not present:
        return {}
    counts = [render_sql("(SELECT COUNT(*) FROM {table})", table=table) for table in present]
    try:
        row = conn.execute("SELECT " + ", ".join(counts)).fetchone()
    except sqlite3.DatabaseError:
        return _table_counts_one_by_one(conn, present)
    return dict(zip(present, row, strict=True))


def _table_counts_one_by_one(conn: sqlite3.Connection, present: list[str]) -> dict[str, int]:
    counts = {}
    for table in present:
        try:
            sql = render_sql("SELECT COUNT(*) FROM {table}", table=table)
            counts[table] = conn.execute(sql).fetchone()[0]
        except sqlite3.DatabaseError:
            continue
    return counts


def _counted(
    conn: sqlite3.Connection | None, schema: LedgerSchema, known: dict[str, int] | None
) -> dict[str, int]:
    """The report's row counts: from `known` when the caller read them, else counted here."""
    if conn is None:
        return {}
    if known is None:
        return table_counts(conn, schema)
    return {table: known[table] for table in COUNTED_TABLES if table in known}


@contextmanager
def page_cache(conn: sqlite3.Connection | None) -> Iterator[None]:
    """Run the block with at least a CHECK_CACHE_KIB page cache; the connection's own after."""
    try:
        before = int(conn.execute("PRAGMA cache_size").fetchone()[0]) if conn else None
    except sqlite3.DatabaseError:  # the checks report what is wrong with the file
        before = None
    if before is None or (before < 0 and -before >= CHECK_CACHE_KIB):
        yield
        return
    conn.execute(f"PRAGMA cache_size = -{CHECK_CACHE_KIB}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size = {before}")


# The memo of calls given none (`check_session`): what checks work out from a file's shape is
# the same for every file of that shape while the rule book and the registered plugins (their
# canned queries) are. Held with the checks and plugins it was keyed by, so their ids cannot
# be reused by other objects; replaced when either changes (a plugin registered at run time).
SHARED_MEMO_MAX = 20_000  # entries (a few per check and file shape); a home of many shapes
_shared: dict[str, Any] = {"key": None, "held": None, "memo": {}}


def _shared_memo(checks: list[Check]) -> dict[Any, Any]:
    plugins = list(plugin_manager().get_plugins())
    key = (tuple(id(check) for check in checks), frozenset(id(plugin) for plugin in plugins))
    if _shared["key"] != key or len(_shared["memo"]) > SHARED_MEMO_MAX:
        _shared.update(key=key, held=(list(checks), plugins), memo={})
    return _shared["memo"]


def _profile_checks(memo: dict[Any, Any], checks: list[Check], profile: str) -> list[Check]:
    """`for_profile`, once per run and profile: a memo serves one list of checks (see
    `check_session`), and the profile's stand-in checks hold no state between reports."""
    key = ("profile", profile)
    chosen = memo.get(key)
    if chosen is None:
        chosen = memo[key] = for_profile(checks, profile)
    return chosen


def _run_one(check: Check, ctx: CheckContext) -> list[Finding]:
    """A check's findings; a check that raises is reported as failed, never crashes a report."""
    try:
        return check.run(ctx)
    except Exception as error:  # noqa: BLE001 - a plugin's bug must not hide other findings
        return [check.finding(ctx, failed=f"{type(error).__name__}: {error}")]


def _run_checks(
    chosen: list[Check], ctx: CheckContext, reopen: Callable[[], sqlite3.Connection] | None
) -> dict[int, list[Finding]]:
    """Every check's findings, in the rule book's order. With `reopen` (a second read-only
    connection to the same file), the checks that read the whole file run on it in a second
    thread meanwhile: SQLite lets go of the GIL while it reads, so a big session's report
    takes the longer of the two parts instead of their sum (integrity_check is about half
    of a 1,000,000-row session's)."""
    aside = [check for check in chosen if check.reads_whole_file]
    if reopen is None or ctx.conn is None or not aside or len(aside) == len(chosen):
        return {id(check): _run_one(check, ctx) for check in chosen}
    with ThreadPoolExecutor(1) as pool:
        there = pool.submit(_run_on_another_connection, aside, ctx, reopen)
        here = {id(check): _run_one(check, ctx) for check in chosen if not check.reads_whole_file}
        try:
            here.update(there.result())
        except (LedgerUnavailable, sqlite3.Error):  # the file changed since: read it here
            here.update({id(check): _run_one(check, ctx) for check in aside})
    return here


def _run_on_another_connection(
    checks: list[Check], ctx: CheckContext, reopen: Callable[[], sqlite3.Connection]
) -> dict[int, list[Finding]]:
    conn = reopen()
    try:
        prepare_connection(conn)
        aside = dataclasses.replace(ctx, conn=conn)
        with page_cache(conn):
            return {id(check): _run_one(check, aside) for check in checks}
    finally:
        conn.close()


def _reused(chosen: list[Check], reuse: dict[str, Any] | None) -> dict[int, list[Finding]] | None:
    """{id(check): its findings in `reuse`} for every check of `chosen` that judges the file
    alone; None (run everything) unless `reuse` has findings for each of them."""
    if reuse is None:
        return None
    stored: dict[str, list[Finding]] = {}
    for finding in reuse["findings"]:
        stored.setdefault(finding["check"], []).append(Finding.from_dict(finding))
    reused = {}
    for check in chosen:
        if judges_file_alone(check):
            if check.id not in stored:
                return None
            reused[id(check)] = stored[check.id]
    return reused


def _without_a_ledger(
    chosen: list[Check], ctx: CheckContext, profile: str
) -> dict[int, list[Finding]]:
    """{id(check): its findings} of the checks that judge the file alone
    (`profiles.judges_file_alone`), for a session without a ledger on disk: each says it
    does not apply ("no ledger on disk", or what the empty schema lacks), the same for every
    such session, whatever its row or liveness. Run once per run (`ctx.memo`) and profile,
    and shared by those sessions' reports (a finding is never changed once made): a first
    build checks 7,000 vacuumed sessions at 10,000."""
    key = ("without-a-ledger", profile)
    held = ctx.memo.get(key)
    if held is None:
        alone = [check for check in chosen if judges_file_alone(check)]
        held = ctx.memo[key] = {id(check): _run_one(check, ctx) for check in alone}
    return dict(held)


def check_session(
    conn: sqlite3.Connection | None,
    *,
    session: Any = None,
    main_row: dict[str, Any] | None = None,
    live: bool = False,
    database: str | None = None,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    checks: list[Check] | None = None,
    profile: str = "full",
    tables: dict[str, int] | None = None,
    memo: dict[Any, Any] | None = None,
    reopen: Callable[[], sqlite3.Connection] | None = None,
    schema: LedgerSchema | None = None,
    reuse: dict[str, Any] | None = None,
) -> Report:
    """Check one session's ledger (`conn`, or None when it has none on disk).

    `session` is the catalog Session (paths and WAL state for the file-level checks);
    `main_row` its main.db row (defaults to `session.main_row`); `database` the Datasette
    database name used in links (defaults to the catalog's name for the session).
    `profile` is "full" (every check as it is), "rows" (the pages' per-row verdicts) or "quick"
    (the overview's: no check whose cost grows with the whole file); see `checks/profiles.py`. `tables` are row counts the caller has
    already read (the overview counts every table); the report counts them itself otherwise.
    `memo` lets the sessions of one run share what checks work out from a file's shape alone
    (`CheckContext.memo`); give the same dict to every call of the run, with the same `checks`.
    Without one, calls share a memo while the rule book and the registered plugins are the
    same (a refresh of the index checks 10,000 sessions one call each). `reopen` opens a
    second connection to the same file for the checks that read all of it (`_run_checks`):
    for one session checked alone; a run over many sessions keeps its cores busy already.
    `schema`: `read_schema(conn)` when the caller has just read it (the index build).
    `reuse`: a report dict (`Report.to_dict`) of the same profile over the same file version,
    session and database, whose main.db row or liveness may differ: the findings of the
    checks that judge the file alone (`profiles.judges_file_alone`) and the row counts are
    taken from it, and only the others run (the index's verdict pass after a changed row).
    """
    started = time.perf_counter()
    if main_row is None and session is not None:
        main_row = getattr(session, "main_row", None)
    if schema is None:
        schema = read_schema(conn) if conn is not None else LedgerSchema({})
    if conn is not None:
        prepare_connection(conn)
    every = all_checks() if checks is None else checks
    ctx = CheckContext(
        conn=conn,
        schema=schema,
        session=session,
        main_row=main_row,
        live=live,
        database=database or database_name_for(session),
        sample_limit=sample_limit,
        memo=_shared_memo(every) if memo is None else memo,
    )
    chosen = _profile_checks(ctx.memo, every, profile)
    reused = _reused(chosen, reuse)
    if reused is not None:
        tables = dict(reuse["tables"])
    elif conn is None:
        reused = _without_a_ledger(chosen, ctx, profile)
    running = [check for check in chosen if reused is None or id(check) not in reused]
    with page_cache(conn):
        fused.read_shared(running, ctx)
        found = _run_checks(running, ctx, reopen)
    if reused is not None:
        found.update(reused)
    findings = [f for check in chosen for f in found[id(check)]]
    return Report(
        findings=findings,
        era=schema.era if conn is not None else "no ledger",
        live=live,
        session=session.summary() if session is not None else None,
        database=ctx.database,
        tables=_counted(conn, schema, tables),
        duration_ms=(time.perf_counter() - started) * 1000,
        migrated=schema.migrated,
    )
