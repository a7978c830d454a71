"""Run checks on catalog sessions outside Datasette (CLI, benchmarks, tests).

Files are opened only through `readonly.open_readonly`, which never changes a byte of them;
a ledger SQLite cannot read raises `LedgerUnavailable` for the caller to report.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.checks.engine import all_checks, check_session
from datasette_capsem.checks.model import DEFAULT_SAMPLE_LIMIT, Check, Report
from datasette_capsem.checks.profiles import FULL
from datasette_capsem.checks.workers import ordered_map
from datasette_capsem.config import Settings
from datasette_capsem.ledger.schema import LedgerSchema

T = TypeVar("T")
# Sessions per task of a worker process: results stream back in order and Ctrl-C stops
# promptly, and handing out tasks costs next to nothing. A run of fewer than two tasks stays
# in this process.
PROCESS_CHUNK = 16
_lent = threading.local()  # (path, connection) a caller lends for its checks (`lending`)


@contextmanager
def lending(
    path: Path, conn: sqlite3.Connection, schema: LedgerSchema | None = None
) -> Iterator[None]:
    """Within the block, `check_catalog_session` of a session whose ledger is `path` runs on
    `conn` instead of opening the file again: the index build has just opened the ledger
    through `readonly` to read it, and checks it on that connection (one open, one read of
    its schema and pages instead of two). The lender closes it; the check leaves it as it
    found it (its page cache size restored, one SQL function registered). `schema`: the
    file's `read_schema`, when the lender has read it."""
    previous = getattr(_lent, "held", None)
    _lent.held = (path, conn, schema)
    try:
        yield
    finally:
        _lent.held = previous


def check_catalog_session(
    session: Session,
    settings: Settings,
    *,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    profile: str = FULL,
    checks: list[Check] | None = None,
    memo: dict[Any, Any] | None = None,
    alone: bool = False,
    reuse: dict[str, Any] | None = None,
) -> Report:
    """The report of one session; raises LedgerUnavailable when its ledger cannot be read.
    `checks` and `memo`: see `check_session` (a run over many sessions passes them). `alone`:
    nothing else is being checked, so the checks that read the whole file get a second
    connection and the second core (`check_session`'s `reopen`). `reuse`: see
    `check_session`."""
    options = {
        "session": session,
        "live": session.live,
        "sample_limit": sample_limit,
        "profile": profile,
        "checks": checks,
        "memo": memo,
        "reuse": reuse,
    }
    path = session.ledger_path
    if path is None:
        return check_session(None, **options)
    held = getattr(_lent, "held", None)
    if held is not None and held[0] == path:
        return check_session(held[1], schema=held[2], **options)
    conn = readonly.open_readonly(path, settings.cache_dir)
    if alone:
        options["reopen"] = lambda: readonly.open_readonly(path, settings.cache_dir)
    try:
        return check_session(conn, **options)
    finally:
        conn.close()


@dataclass
class Outcome:
    """One session of a `check --all` run: its report, or why it could not be read."""

    session: Session
    report: Report | None = None
    unreadable: readonly.LedgerUnavailable | None = None

    @property
    def verdict(self) -> str:
        return "unreadable" if self.report is None else self.report.verdict

    def to_dict(self) -> dict[str, Any]:
        if self.report is not None:
            return self.report.to_dict()
        problem = self.unreadable
        return {
            "session": self.session.summary(),
            "verdict": "unreadable",
            "unreadable": {
                "kind": problem.kind,
                "detail": problem.detail,
                "path": str(problem.path),
            }
            if problem
            else None,
        }


def _outcome(session: Session, settings: Settings, options: dict[str, Any]) -> Outcome:
    try:
        return Outcome(session, report=check_catalog_session(session, settings, **options))
    except readonly.LedgerUnavailable as problem:
        return Outcome(session, unreadable=problem)


def _check_one(
    settings: Settings, sample_limit: int, render: Callable[[Outcome], T], session: Session
) -> T:
    """`render` of one session's outcome, in whichever process checks it (`check_all`)."""
    return render(_outcome(session, settings, run_options(sample_limit)))


@functools.cache
def run_options(sample_limit: int = DEFAULT_SAMPLE_LIMIT) -> dict[str, Any]:
    """The options of a run over many sessions (`check_catalog_session`'s keywords), once per
    run: the rule book taken once, and what checks work out from a file's shape shared
    between files of the same shape."""
    return {"sample_limit": sample_limit, "checks": all_checks(), "memo": {}}


def new_run() -> None:
    """A run starts: take the rule book again at its first check (a plugin may have been
    registered since the last run). Forked workers inherit what the run took."""
    run_options.cache_clear()


def _itself(outcome: Outcome) -> Outcome:
    return outcome


def check_all(
    catalog: Catalog,
    settings: Settings,
    *,
    workers: int = 2,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    sessions: list[Session] | None = None,
    render: Callable[[Outcome], T] = _itself,  # type: ignore[assignment]
) -> Iterator[T]:
    """`render(outcome)` of every session (newest first), in that order whatever `workers`.

    With `workers` > 1 the sessions are checked in as many worker processes (`workers.py`:
    threads do not help) and `render` runs there too, so what comes back is only what the
    caller keeps (a line of JSON, a row of a table); it and its result must pickle (`render`
    a module-level function). Raises WorkerFailed if a worker process dies.
    """
    chosen = catalog.sessions() if sessions is None else sessions
    run = functools.partial(_check_one, settings, sample_limit, render)
    new_run()
    if workers <= 1 or len(chosen) < 2 * PROCESS_CHUNK:
        yield from (run(session) for session in chosen)
        return
    yield from ordered_map(run, [(s,) for s in chosen], workers, chunk=PROCESS_CHUNK)
