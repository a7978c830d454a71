"""In-memory rows of one session.db, and the bulk insert that writes them.

Rows carry explicit ids so the generator knows every row id it puts in the manifest before the
file exists, and defects can be injected by editing rows rather than re-reading the file.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from datasette_capsem.generate import era_templates

Row = dict[str, Any]


class Ledger:
    """Rows per table, with per-table id counters (AUTOINCREMENT ids start at 1)."""

    def __init__(self, next_ids: dict[str, int] | None = None) -> None:
        self.rows: dict[str, list[Row]] = defaultdict(list)
        self._next: dict[str, int] = dict(next_ids or {})

    def add(self, table: str, **row: Any) -> int:
        """Append a row and return its id."""
        rid = self._next.get(table, 1)
        self._next[table] = rid + 1
        row["id"] = rid
        self.rows[table].append(row)
        return rid

    def get(self, table: str, rid: int) -> Row:
        """Return the row of ``table`` with id ``rid``."""
        for row in self.rows[table]:
            if row["id"] == rid:
                return row
        raise KeyError((table, rid))

    def where(self, table: str, **match: Any) -> list[Row]:
        """Rows of ``table`` whose fields equal every value in ``match``."""
        return [r for r in self.rows[table] if all(r.get(k) == v for k, v in match.items())]

    def next_ids(self) -> dict[str, int]:
        """Counters to continue from (e.g. in the next batch of a live writer)."""
        return dict(self._next)

    def next_id(self, table: str) -> int:
        return self._next.get(table, 1)

    def count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())


def insert_rows(conn: sqlite3.Connection, era: str, ledger: Ledger) -> None:
    """Insert every row into a database of ``era``, one executemany per table.

    Fields the era's table lacks are dropped (the same content serves every era); a table the
    era lacks is a generator bug and raises.
    """
    columns = era_templates.table_columns(era)
    for table, rows in ledger.rows.items():
        if not rows:
            continue
        if table not in columns:
            raise KeyError(f"era {era!r} has no table {table!r}")
        keys: set[str] = set()
        for row in rows:
            keys.update(row)
        cols = [c for c in columns[table] if c in keys]
        sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        conn.executemany(sql, ([row.get(c) for c in cols] for row in rows))


def write_ledger(path: Path, era: str, ledger: Ledger, *, wal: bool = True) -> None:
    """Create ``path`` from the era template, fill it, and leave it as Capsem does after a clean
    stop: WAL mode in the header (bytes 18/19 = 2), no -wal or -shm beside it."""
    era_templates.create_db(path, era)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        insert_rows(conn, era, ledger)
        conn.execute("COMMIT")
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
