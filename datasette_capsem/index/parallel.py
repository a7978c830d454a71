"""Reading many ledgers at once for a refresh: in worker processes when there are many.

A full build reads every ledger (3,000 at 10,000 sessions): the SQL, turning rows into facts
and masking every searchable text are per-ledger work that worker processes share
(`checks/workers.py`), while the refresh's one connection writes what they read, in the order
of the plan, so the index holds the same rows whatever the number of workers. A refresh of a
few changed ledgers reads them in its own thread: starting processes would cost more.

A ledger whose session's quick check is wanted too is checked by the same task, on the
connection that reads it (`reader.read_ledger`'s `check`): one open and one schema read per
ledger, one pool of workers per build. `check_sessions` checks the sessions left (aliases of
a file, a changed main.db row over an unchanged ledger, sessions without a ledger).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from datasette_capsem import readonly
from datasette_capsem.catalog import Session
from datasette_capsem.checks.workers import default_workers, ordered_map
from datasette_capsem.config import Settings
from datasette_capsem.index import verdicts
from datasette_capsem.index.plan import Parent
from datasette_capsem.index.reader import LedgerRead, read_ledger

PROCESSES_FROM = 64  # ledgers to read before worker processes are worth starting
CHUNK = 4  # ledgers per task: a few, as one ledger can be much bigger than the others


def _read_ahead(session: Session, *_options) -> None:
    """Start reading a session's ledger from disk a few ledgers before its turn: read cold,
    page by page, a ledger waited ten times its CPU (`readonly.read_ahead`)."""
    readonly.read_ahead(session.ledger_path)


def timed_read(
    session: Session, cache_dir: Path, parent: Parent | None, check: Settings | None = None
) -> tuple[LedgerRead, float]:
    """`read_ledger` and the milliseconds its reading took (stored as the ledger's
    `index_ms`; a quick check run on the way has its own `check_ms`)."""
    began = time.perf_counter()
    read = read_ledger(session, cache_dir, parent, check)
    elapsed = (time.perf_counter() - began) * 1000
    if read.checked is not None:
        elapsed = max(0.0, elapsed - read.checked.check_ms)
    return read, round(elapsed, 3)


def read_ledgers(
    jobs: list[tuple[Session, Parent | None, Settings | None]], cache_dir: Path
) -> Iterator[tuple[LedgerRead, float]]:
    """`timed_read` of each (session, fork parent, settings to quick-check it with or None),
    in the order of `jobs`."""
    items = [(session, cache_dir, parent, check) for session, parent, check in jobs]
    workers = default_workers()
    if len(items) < PROCESSES_FROM or workers <= 1:
        return (timed_read(*item) for item in items)
    return ordered_map(timed_read, items, workers, chunk=CHUNK, ahead=_read_ahead)


def check_sessions(sessions: list[Session], settings: Settings) -> Iterator[verdicts.Checked]:
    """`verdicts.check` of each session, in order; those with a ledger in worker processes
    when there are many (each stores its report as it would here). A session without a
    ledger (vacuumed: a main.db row) is checked here: its check reads no file, and sending
    70,000 of them to workers costs more than checking them."""
    workers = default_workers()
    with_ledger = [(s, settings) for s in sessions if s.ledger_path is not None]
    if len(with_ledger) < PROCESSES_FROM or workers <= 1:
        return (verdicts.check(session, settings) for session in sessions)
    checked = ordered_map(verdicts.check, with_ledger, workers, chunk=16, ahead=_read_ahead)
    return _merged(sessions, settings, checked)


def _merged(
    sessions: list[Session], settings: Settings, read: Iterator[verdicts.Checked]
) -> Iterator[verdicts.Checked]:
    """The workers' verdicts of the sessions with a ledger, in order, between this process's
    verdicts of the others."""
    for session in sessions:
        yield next(read) if session.ledger_path is not None else verdicts.check(session, settings)
    for _extra in read:  # none: runs the workers' generator to its end (the pool shut down)
        pass
