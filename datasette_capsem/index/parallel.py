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
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from pathlib import Path
from typing import TypeVar

from datasette_capsem import readonly
from datasette_capsem.catalog import Session
from datasette_capsem.checks.workers import default_workers, ordered_map
from datasette_capsem.config import Settings
from datasette_capsem.index import verdicts
from datasette_capsem.index.plan import Parent
from datasette_capsem.index.reader import LedgerRead, read_ledger

R = TypeVar("R")

PROCESSES_FROM = 64  # ledgers to read before worker processes are worth starting
CHUNK = 4  # ledgers per task: a few, as one ledger can be much bigger than the others


AHEAD = 3  # ledgers whose files are asked for before their turn (`run_ahead`)


def _read_ahead(session: Session, *_options) -> None:
    readonly.read_ahead(session.ledger_path)


def run_ahead(
    function: Callable[..., R], chunk: Sequence[tuple], ahead: Callable[..., None] = _read_ahead
) -> list[R]:
    """`function(*args)` of each item of one worker's chunk, `ahead(*args)` of the item AHEAD
    places further first: the kernel reads that ledger's file (`readonly.read_ahead`) while
    this one is worked on. Read cold, SQLite asks for a ledger one page at a time, each a
    random read of the disk: a 470 KB ledger waited 100-200 ms for ~12 ms of CPU (the verdict
    pass's `check_ms` in a 100,000-session build)."""
    for args in chunk[:AHEAD]:
        ahead(*args)
    results = []
    for position, args in enumerate(chunk):
        if position + AHEAD < len(chunk):
            ahead(*chunk[position + AHEAD])
        results.append(function(*args))
    return results


def _mapped_ahead(
    function: Callable[..., R], items: Sequence[tuple], workers: int, chunk: int
) -> Iterator[R]:
    """`ordered_map` of `function` over `items` in chunks of `chunk`, each read ahead."""
    chunks = [(function, items[start : start + chunk]) for start in range(0, len(items), chunk)]
    return chain.from_iterable(ordered_map(run_ahead, chunks, workers, chunk=1))


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
    return _mapped_ahead(timed_read, items, workers, CHUNK)


def check_sessions(sessions: list[Session], settings: Settings) -> Iterator[verdicts.Checked]:
    """`verdicts.check` of each session, in order; those with a ledger in worker processes
    when there are many (each stores its report as it would here). A session without a
    ledger (vacuumed: a main.db row) is checked here: its check reads no file, and sending
    70,000 of them to workers costs more than checking them."""
    workers = default_workers()
    with_ledger = [(s, settings) for s in sessions if s.ledger_path is not None]
    if len(with_ledger) < PROCESSES_FROM or workers <= 1:
        return (verdicts.check(session, settings) for session in sessions)
    checked = _mapped_ahead(verdicts.check, with_ledger, workers, 16)
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
