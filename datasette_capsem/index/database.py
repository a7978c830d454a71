"""The index as the Datasette database `index`: read-only, whatever Datasette asks for."""

from __future__ import annotations

import sqlite3

from datasette.database import Database

INDEX_DATABASE = "index"


class ReadOnlyIndexError(sqlite3.OperationalError):
    pass


class IndexDatabase(Database):
    """Reads with `mode=ro`; only the refresh (its own connection) ever writes the file."""

    def __init__(self, ds, path):
        super().__init__(ds, path=str(path), is_mutable=True)

    def connect(self, write: bool = False) -> sqlite3.Connection:
        if write:
            raise ReadOnlyIndexError("the cross-session index is read-only in Datasette")
        conn = super().connect(write=False)
        conn.execute("PRAGMA query_only = ON")
        return conn

    async def execute_write_fn(self, fn, block=True):
        raise ReadOnlyIndexError("the cross-session index is read-only in Datasette")
