"""Run checks on catalog sessions outside Datasette (CLI, benchmarks, tests).

Files are opened only through `readonly.open_readonly`, which never changes a byte of them;
a ledger SQLite cannot read raises `LedgerUnavailable` for the caller to report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.checks.engine import all_checks, check_session
from datasette_capsem.checks.model import DEFAULT_SAMPLE_LIMIT, Check, Report
from datasette_capsem.checks.profiles import FULL
from datasette_capsem.config import Settings


def check_catalog_session(
    session: Session,
    settings: Settings,
    *,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    profile: str = FULL,
    checks: list[Check] | None = None,
    memo: dict[Any, Any] | None = None,
) -> Report:
    """The report of one session; raises LedgerUnavailable when its ledger cannot be read.
    `checks` and `memo`: see `check_session` (a run over many sessions passes them)."""
    options = {"session": session, "live": session.live, "sample_limit": sample_limit,
               "profile": profile, "checks": checks, "memo": memo}  # fmt: skip
    if session.ledger_path is None:
        return check_session(None, **options)
    conn = readonly.open_readonly(session.ledger_path, settings.cache_dir)
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


def check_all(
    catalog: Catalog,
    settings: Settings,
    *,
    workers: int = 2,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    sessions: list[Session] | None = None,
) -> Iterator[Outcome]:
    """Outcomes of every session (newest first), checked on `workers` threads.

    SQLite releases the GIL while it runs a statement, so threads overlap the SQL of
    different files; results come back in catalog order. The run takes the rule book once and
    shares what checks work out from a file's shape between files of the same shape.
    """
    chosen = catalog.sessions() if sessions is None else sessions
    options = {"sample_limit": sample_limit, "checks": all_checks(), "memo": {}}
    run: Callable[[Session], Outcome] = lambda s: _outcome(s, settings, options)  # noqa: E731
    if workers <= 1:
        yield from map(run, chosen)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield from pool.map(run, chosen)
