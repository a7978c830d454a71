"""The index as the Datasette database `index`: read-only, whatever Datasette asks for."""

from __future__ import annotations

import contextvars
import sqlite3
import threading

from datasette.database import Database

from datasette_capsem import redaction

INDEX_DATABASE = "index"


class ReadOnlyIndexError(sqlite3.OperationalError):
    pass


class IndexDatabase(Database):
    """Reads with `mode=ro`; only the refresh (its own connection) ever writes the file."""

    def __init__(self, ds, path):
        super().__init__(ds, path=str(path), is_mutable=True)
        self._installed: dict[int, object] = {}  # id(connection) -> the policy it enforces
        self._lock = threading.Lock()

    def connect(self, write: bool = False) -> sqlite3.Connection:
        if write:
            raise ReadOnlyIndexError("the cross-session index is read-only in Datasette")
        conn = super().connect(write=False)
        conn.execute("PRAGMA query_only = ON")
        return conn

    async def execute_write_fn(self, fn, block=True):
        raise ReadOnlyIndexError("the cross-session index is read-only in Datasette")

    def _guarded(self, fn, conn: sqlite3.Connection):
        """`fn` on `conn` under the request's secret policy (redaction.apply_policy): a
        viewer reads the index through the same projection as a ledger."""
        with self._lock:
            installed = self._installed.get(id(conn))
        now = redaction.apply_policy(conn, installed, "index")
        with self._lock:
            self._installed[id(conn)] = now
        return fn(conn)

    async def execute_fn(self, fn):
        # The request's policy lives in contextvars; Datasette's worker threads do not see
        # them unless the context is carried in.
        context = contextvars.copy_context()
        return await super().execute_fn(lambda conn: context.run(self._guarded, fn, conn))

    async def _execute_fn(self, fn):  # Datasette 1.0 reads through this one
        context = contextvars.copy_context()
        return await super()._execute_fn(lambda conn: context.run(self._guarded, fn, conn))

    async def columns_read(self, sql: str) -> list[tuple[str, str, str]]:
        """(table, column, kind) of the columns `sql` would read that are not shown raw."""

        def probe(conn: sqlite3.Connection):
            try:
                return redaction.columns_read(conn, sql, "index")
            finally:
                with self._lock:
                    self._installed.pop(id(conn), None)
                conn.set_authorizer(None)

        return await self.execute_fn(probe)
