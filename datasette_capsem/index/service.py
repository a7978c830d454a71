"""The cross-session index as a service: incremental refresh, background thread, lookups.

A refresh stats every on-disk ledger (two `stat` calls each) and re-reads only those whose
size or mtime, or their WAL's, changed since they were indexed. Pages never read ledgers or
the index per request: they use `snapshot()`, an in-memory copy of the per-session figures
that is replaced whole after each refresh that changed something.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.config import Settings
from datasette_capsem.index import store
from datasette_capsem.index.extract import read_facts
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.memory import release_memory
from datasette_capsem.mount import readonly
from datasette_capsem.sqlfiles import load_sql

Progress = Callable[[int, int], None]
COMMIT_EVERY_SECONDS = 0.5  # readers see a long first build fill in as it goes
LOOKUP_LIMIT = 1000


def stat_fingerprint(path: Path) -> store.Fingerprint | None:
    """(size, mtime_ns, wal size, wal mtime_ns) without opening the ledger; None if gone."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    try:
        wal = os.stat(f"{path}-wal")
        return (stat.st_size, stat.st_mtime_ns, wal.st_size, wal.st_mtime_ns)
    except OSError:
        return (stat.st_size, stat.st_mtime_ns, None, None)


@dataclass(frozen=True)
class IndexSnapshot:
    """What the index knew at one moment: per-session ledger figures and daily usage."""

    generation: int = 0
    ledgers: dict[str, dict[str, Any]] = field(default_factory=dict)
    daily_usage: dict[str, list[tuple]] = field(default_factory=dict)

    @cached_property
    def problems(self) -> int:
        """Ledgers that could not be read (counted once per snapshot)."""
        return sum(1 for row in self.ledgers.values() if row.get("problem"))


@dataclass
class RefreshReport:
    """What one refresh did; `indexed` lists the sessions whose ledgers were read."""

    indexed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)
    unchanged: int = 0
    total: int = 0
    seconds: float = 0.0


def _read_ledger(session: Session, cache_dir: Path) -> tuple[Any, str | None, str | None]:
    """(facts, era, problem) of one ledger, opened only through the read-only opener."""
    try:
        conn = readonly.open_readonly(session.ledger_path, cache_dir)
    except readonly.LedgerUnavailable as error:
        return None, None, f"{error.kind}: {error.detail}"
    try:
        schema = read_schema(conn)
        return read_facts(conn, schema), schema.era, None
    except sqlite3.Error as error:
        return None, None, f"unreadable: {error}"
    finally:
        conn.close()


class IndexService:
    """One per Datasette instance (and per CLI run); safe to call from any thread."""

    def __init__(self, settings: Settings, catalog: Catalog):
        self.settings = settings
        self.catalog = catalog
        self.path = store.index_path(settings.cache_dir)
        self._refresh_lock = threading.Lock()
        self._snapshot: IndexSnapshot | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress = (0, 0)
        self._refreshing = False
        self._last: dict[str, Any] = {}
        # Called after every refresh, in the refreshing thread (e.g. to rebuild the session
        # list there rather than in the next request).
        self.after_refresh: list[Callable[[], None]] = []

    # -- refresh ------------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create the file so Datasette can mount it before the first refresh finishes."""
        store.connect_writer(self.path).close()

    def record_error(self, message: str) -> None:
        self._last = {**self._last, "error": message}

    def refresh(self, progress: Progress | None = None) -> RefreshReport:
        """Bring the index up to date with the ledgers on disk; one refresh at a time."""
        with self._refresh_lock:
            self._refreshing = True
            try:
                report = self._refresh(progress)
            except (sqlite3.Error, OSError) as error:
                self.record_error(str(error))
                raise
            finally:
                self._refreshing = False
        self._last = {
            "at": time.time(),
            "seconds": report.seconds,
            "error": None,
            "indexed": len(report.indexed),
            "removed": len(report.removed),
        }
        for listener in self.after_refresh:
            listener()
        if report.indexed:
            release_memory()
        return report

    def _refresh(self, progress: Progress | None) -> RefreshReport:
        started = time.perf_counter()
        wanted = {s.id: s for s in self.catalog.snapshot().sessions.values() if s.ledger_path}
        report = RefreshReport(total=len(wanted))
        conn = store.connect_writer(self.path)
        try:
            stored = store.stored_fingerprints(conn)
            todo = self._changed(wanted, stored, report)
            report.removed = sorted(set(stored) - set(wanted))
            for session_id in report.removed:
                store.forget(conn, session_id)
            self._index_all(conn, todo, report, progress)
            store.update_names(conn, {sid: (s.name, s.kind) for sid, s in wanted.items()})
            report.seconds = time.perf_counter() - started
            store.set_meta(conn, last_refresh_at=time.time(), last_refresh_seconds=report.seconds)
            conn.commit()
        finally:
            conn.close()
        if report.indexed or report.removed or self._snapshot is None:
            self._snapshot = self._load_snapshot()
        return report

    def _changed(self, wanted: dict[str, Session], stored: dict, report: RefreshReport) -> list:
        todo = []
        for session_id, session in wanted.items():
            fingerprint = stat_fingerprint(session.ledger_path)
            if stored.get(session_id) == (str(session.ledger_path), fingerprint):
                report.unchanged += 1
            elif fingerprint is not None:
                todo.append((session, fingerprint))
        return todo

    def _index_all(self, conn, todo: list, report: RefreshReport, progress) -> None:
        self._progress = (0, len(todo))
        last_commit = time.monotonic()
        for done, (session, fingerprint) in enumerate(todo, start=1):
            began = time.perf_counter()
            facts, era, problem = _read_ledger(session, self.settings.cache_dir)
            ledger = {
                "session_id": session.id,
                "session_name": session.name,
                "kind": session.kind,
                "path": session.ledger_path,
                "era": era,
                "fingerprint": fingerprint,
                "index_ms": round((time.perf_counter() - began) * 1000, 3),
            }
            store.write_ledger(conn, ledger, facts, problem)
            report.indexed.append(session.id)
            if problem:
                report.problems[session.id] = problem
            if time.monotonic() - last_commit > COMMIT_EVERY_SECONDS:
                conn.commit()
                last_commit = time.monotonic()
            self._progress = (done, len(todo))
            if progress:
                progress(done, len(todo))

    # -- the in-memory copy -------------------------------------------------------------------

    def _load_snapshot(self) -> IndexSnapshot:
        generation = (self._snapshot.generation + 1) if self._snapshot else 1
        with store.reading(self.path) as conn:
            if conn is None:
                return IndexSnapshot(generation=generation)
            ledgers = {
                row["session_id"]: dict(row)
                for row in conn.execute(load_sql(store.__package__, "load_totals"))
            }
            usage: dict[str, list[tuple]] = {}
            for row in conn.execute(load_sql(store.__package__, "load_daily_usage")):
                usage.setdefault(row[0], []).append(tuple(row[1:]))
        return IndexSnapshot(generation=generation, ledgers=ledgers, daily_usage=usage)

    def snapshot(self) -> IndexSnapshot:
        """The latest in-memory figures (read from disk once if no refresh ran yet)."""
        if self._snapshot is None:
            try:
                self._snapshot = self._load_snapshot()
            except sqlite3.Error:
                return IndexSnapshot()
        return self._snapshot

    # -- the API other engines use ------------------------------------------------------------

    def lookup(self, value: str, limit: int = LOOKUP_LIMIT) -> list[dict]:
        """Where a trace, turn, event, call or message id occurs, across all indexed ledgers."""
        with store.reading(self.path) as conn:
            if conn is None:
                return []
            rows = conn.execute(
                load_sql(store.__package__, "lookup"), {"value": value, "limit": limit}
            )
            return [dict(row) for row in rows]

    def covered_sessions(self) -> set[str]:
        """Sessions whose ledgers were read without a problem."""
        return {sid for sid, row in self.snapshot().ledgers.items() if not row.get("problem")}

    def freshness(self) -> dict[str, Any]:
        """How current the index is, for pages and JSON (no I/O)."""
        last = self._last
        done, total = self._progress
        snapshot = self._snapshot or IndexSnapshot()
        age = time.time() - last["at"] if last.get("at") else None
        return {
            "path": str(self.path),
            "ready": self._snapshot is not None,
            "refreshing": self._refreshing,
            "progress": {"done": done, "total": total} if self._refreshing else None,
            "last_refresh_at": _iso(last.get("at")),
            "last_refresh_seconds": last.get("seconds"),
            "age_seconds": None if age is None else round(age, 1),
            "last_error": last.get("error"),
            "ledgers_indexed": len(snapshot.ledgers),
            "ledgers_with_problems": snapshot.problems,
            "refresh_interval_seconds": self.settings.index_refresh_seconds,
            "generation": snapshot.generation,
        }

    # -- background ---------------------------------------------------------------------------

    def start_background(self) -> None:
        """Refresh now and then every `index_refresh_seconds`, off the request path."""
        interval = self.settings.index_refresh_seconds
        if interval <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(
            target=_background_loop,
            args=(weakref.ref(self), self._stop, interval),
            name="capsem-index-refresh",
            daemon=True,
        )
        self._thread.start()

    def stop_background(self) -> None:
        self._stop.set()


def _background_loop(ref: weakref.ref, stop: threading.Event, interval: float) -> None:
    """Holds the service only weakly, so a discarded Datasette lets the thread end."""
    while not stop.is_set():
        service = ref()
        if service is None:
            return
        # A failure is recorded in freshness()["last_error"]; the next round retries.
        with contextlib.suppress(sqlite3.Error, OSError):
            service.refresh()
        del service
        stop.wait(interval)


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
