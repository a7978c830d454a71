"""A Datasette Database over a Capsem file that is read-only by construction.

Datasette 0.65 keeps one connection per worker thread per database *name* in a module-level
thread-local that it never closes, so remounting a name reuses stale connections and every
mount/unmount leaks descriptors (datasette-notes.md). This class owns a single connection
instead, used by one SQL thread at a time and closed when the database is evicted. One
connection per ledger (not one per thread) also keeps memory and descriptors per mount low:
each SQLite connection holds its own parsed copy of the ~110-object ledger schema.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datasette.database import Database

from datasette_capsem import redaction
from datasette_capsem.ledger.schema import LedgerSchema, read_schema
from datasette_capsem.mount import readonly


class ReadOnlyDatabaseError(sqlite3.OperationalError):
    pass


def _quick_fingerprint(path: Path) -> tuple:
    """Two stats: enough to notice a writer appearing, leaving or adding frames."""
    result = []
    for candidate in (str(path), f"{path}-wal"):
        try:
            stat = os.stat(candidate)
            result.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            result.append(None)
    return tuple(result)


class LedgerDatabase(Database):
    """One mounted Capsem SQLite file (a session ledger or main.db)."""

    def __init__(self, ds, path: Path, cache_dir: Path):
        self.source_path = Path(path)
        self.cache_dir = cache_dir
        self._state = readonly.inspect_file(self.source_path)  # raises LedgerUnavailable
        super().__init__(ds, path=str(self.source_path), is_mutable=True)
        self._fingerprint = _quick_fingerprint(self.source_path)
        self._generation = 0
        self._connection: tuple[int, sqlite3.Connection] | None = None
        self._lock = threading.Lock()  # guards the connection and the open-mode state
        self._use = threading.Lock()  # one query at a time on the connection
        self._in_flight = 0
        self._closed = False
        self._schema: LedgerSchema | None = None
        self._schema_generation = -1

    # -- connections --------------------------------------------------------------------------

    @property
    def open_mode(self) -> str:
        return self._state.mode

    @property
    def open_connection_count(self) -> int:
        return 0 if self._connection is None else 1

    def connect(self, write: bool = False) -> sqlite3.Connection:
        if write:
            raise ReadOnlyDatabaseError("Capsem files are never opened for writing")
        conn = readonly.connect(self._state, self.cache_dir)
        self.ds._prepare_connection(conn, self.name)
        return conn

    def _revalidate(self) -> None:
        """Re-plan the open mode when the file or its WAL changed under us."""
        fingerprint = _quick_fingerprint(self.source_path)
        if fingerprint == self._fingerprint:
            return
        state = readonly.inspect_file(self.source_path)
        with self._lock:
            self._fingerprint = fingerprint
            # mode=ro follows a live WAL by itself; every other mode read a frozen picture.
            if state.mode != self._state.mode or state.mode != "ro":
                self._generation += 1
            self._state = state

    def _current_connection(self) -> sqlite3.Connection:
        """The connection for the current open mode (call with `_use` held)."""
        with self._lock:
            held, generation = self._connection, self._generation
        if held and held[0] == generation:
            return held[1]
        if held:
            held[1].close()
        conn = self.connect()
        with self._lock:
            self._connection = (generation, conn)
        return conn

    async def execute_fn(self, fn: Callable[[sqlite3.Connection], Any]):
        if self._closed:
            raise readonly.LedgerUnavailable("evicted", self.source_path, "database was unmounted")
        self._revalidate()

        def in_thread():
            with self._use:
                conn = self._current_connection()
                redaction.apply_policy(conn)  # the connection serves requests of any actor
                return fn(conn)

        self._in_flight += 1
        try:
            if self.ds.executor is None:
                return in_thread()
            # The request's secret policy lives in a contextvar; carry it into the thread.
            context = contextvars.copy_context()
            return await asyncio.get_event_loop().run_in_executor(
                self.ds.executor, context.run, in_thread
            )
        finally:
            self._in_flight -= 1
            if self._closed and self._in_flight == 0:
                self._close_connections()

    async def execute_write_fn(self, fn, block=True):
        raise ReadOnlyDatabaseError("Capsem files are never opened for writing")

    # -- schema -------------------------------------------------------------------------------

    async def ledger_schema(self) -> LedgerSchema:
        """Tables and columns of the file, re-read only when the file changed."""
        self._revalidate()
        if self._schema is None or self._schema_generation != self._generation:
            self._schema = await self.execute_fn(read_schema)
            self._schema_generation = self._generation
        return self._schema

    # -- lifecycle ----------------------------------------------------------------------------

    def _close_connections(self) -> None:
        with self._lock:
            held, self._connection = self._connection, None
        if held:
            held[1].close()

    def close(self) -> None:
        """Close every connection now, or as soon as in-flight queries finish."""
        self._closed = True
        if self._in_flight == 0:
            self._close_connections()
