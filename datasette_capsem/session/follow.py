"""Following a live ledger: the newest rows of every table, and a cursor of max ids.

A follower (the overview's poller, the tail page, `datasette capsem tail`) keeps a cursor, the
max id it has seen per table, and asks for what lies beyond it. `recent_rows` reads the newest
`window` rows of every table once per file version (the caller caches it by the ledger's file
fingerprint, so any number of followers cost one read); `rows_since` serves each follower its
part of that window. Every table uses AUTOINCREMENT ids (spec §4.2), so ids only grow; a
follower whose cursor is older than the window is told it missed rows (`gap`).

Each row is summarised by a few columns per table (never a body, a header or a query string),
which the pages and the CLI pass through the credential policy (redaction.py) before showing.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from datasette_capsem.graph.values import clip
from datasette_capsem.ledger.dialect import quote_identifier, render_sql
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import TABLES

WINDOW = 200  # newest rows kept per table and file version
MAX_CURSOR_CHARS = 4000
# The columns that say what a row is, per table (those the file has are read, in this order).
SUMMARY_COLUMNS = {t.name: t.summary_columns for t in TABLES if t.summary_columns}
TIME_COLUMNS = ("timestamp", "created_at")
_CURSOR_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,100}):(\d{1,18})")


class BadCursor(ValueError):
    """A `since` value that is not `table:id,table:id…`."""


def followed_tables(schema: LedgerSchema) -> list[str]:
    """The ledger tables a follower sees: every table of the file with an integer id."""
    return sorted(
        name
        for name, columns in schema.tables.items()
        if "id" in columns and not name.startswith("sqlite_")
    )


def parse_cursor(text: str | None) -> dict[str, int] | None:
    """`table:id,table:id` (None when absent); raises BadCursor when malformed."""
    if not text:
        return None
    if len(text) > MAX_CURSOR_CHARS:
        raise BadCursor(f"since is longer than {MAX_CURSOR_CHARS} characters")
    cursor = {}
    for part in text.split(","):
        match = _CURSOR_PART.fullmatch(part)
        if not match:
            raise BadCursor("since must be table:id pairs separated by commas")
        cursor[match.group(1)] = int(match.group(2))
    return cursor


def format_cursor(cursor: dict[str, int]) -> str:
    return ",".join(f"{table}:{int(row_id)}" for table, row_id in sorted(cursor.items()))


def _when(table: str, row: dict[str, Any]) -> str | None:
    for column in TIME_COLUMNS:
        if row.get(column):
            return str(row[column])
    ms = row.get("timestamp_unix_ms")
    if isinstance(ms, (int, float)) and 0 <= ms < 1e15:
        stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return None


def _read_table(conn: sqlite3.Connection, schema: LedgerSchema, table: str, window: int):
    present = schema.tables[table]
    wanted = ["id", *(c for c in TIME_COLUMNS if c in present)]
    wanted += [c for c in ("timestamp_unix_ms", "event_id", "trace_id") if c in present]
    wanted += [c for c in SUMMARY_COLUMNS.get(table, ()) if c in present and c not in wanted]
    sql = render_sql(
        "SELECT {columns} FROM {table} ORDER BY id DESC LIMIT ?",
        table=table,
        fragments={"columns": ", ".join(quote_identifier(c) for c in wanted)},
    )
    cursor = conn.execute(sql, (window,))
    names = [d[0] for d in cursor.description]
    rows = []
    for values in cursor.fetchall():
        raw = dict(zip(names, values, strict=True))
        if not isinstance(raw["id"], int):
            continue
        fields = {
            c: clip(raw[c], 200)
            for c in SUMMARY_COLUMNS.get(table, ())
            if c in raw and raw[c] is not None
        }
        event_id = raw.get("event_id")
        trace_id = raw.get("trace_id")
        rows.append(
            {
                "kind": table,
                "id": raw["id"],
                "at": _when(table, raw),
                "event_id": event_id if isinstance(event_id, str) else None,
                "trace_id": trace_id if isinstance(trace_id, str) else None,
                "fields": fields,
            }
        )
    return rows


@dataclass
class Recent:
    """The newest rows of every followed table of one file version."""

    cursor: dict[str, int]  # max id per table
    rows: dict[str, list[dict[str, Any]]]  # per table, newest first
    floor: dict[str, int] = field(default_factory=dict)  # smallest id held per table
    # The rows as a page shows them, per reader policy and row (`views/follow.py` fills it):
    # a file version's rows never change, so each is masked once per version and policy,
    # however many views and followers ask.
    shown: dict[Any, dict[tuple[str, int], dict[str, Any]]] = field(default_factory=dict)

    def since(
        self,
        cursor: dict[str, int] | None,
        kinds: tuple[str, ...] = (),
        limit: int | None = None,
        trace_id: str | None = None,
    ) -> dict[str, Any]:
        """The rows beyond `cursor` (all held rows when None), of `kinds` (all when empty) and
        of one trace when `trace_id` is given, newest first, and whether some were missed
        because they are older than the window (`gap`)."""
        picked, gap = [], False
        for table, rows in self.rows.items():
            if kinds and table not in kinds:
                continue
            after = (cursor or {}).get(table, 0) if cursor is not None else -1
            picked += [
                r
                for r in rows
                if r["id"] > after and (trace_id is None or r["trace_id"] == trace_id)
            ]
            if cursor is not None and self.floor.get(table, 0) > after + 1:
                gap = True
        picked.sort(key=lambda r: (r["at"] or "", r["id"]), reverse=True)
        if limit is not None and len(picked) > limit:
            picked, gap = picked[:limit], True
        return {"rows": picked, "gap": gap}


def recent_rows(conn: sqlite3.Connection, schema: LedgerSchema, window: int = WINDOW) -> Recent:
    """Read the newest `window` rows of every followed table (id-ordered, index-only limits)."""
    rows = {t: _read_table(conn, schema, t, window) for t in followed_tables(schema)}
    cursor = {t: (r[0]["id"] if r else 0) for t, r in rows.items()}
    # A table holding fewer rows than the window is held whole: nothing older can be missed.
    floor = {t: (r[-1]["id"] if len(r) >= window else 0) for t, r in rows.items()}
    return Recent(cursor=cursor, rows=rows, floor=floor)


def with_summary(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with `summary`, its fields in one line. Call it on a row already redacted
    (redaction.py hides or masks each field by its column name; a summary has none)."""
    fields = row.get("fields") or {}
    return {**row, "summary": " ".join(str(v) for v in fields.values())}


def writer_active(ledger: Path | str) -> bool:
    """A non-empty `-wal` beside the ledger: a writer holds frames (spec §4.7)."""
    try:
        return os.stat(f"{ledger}-wal").st_size > 0
    except OSError:
        return False


def is_live(ledger: Path | str | None, status: str | None) -> bool:
    """Still being written: a non-empty -wal, or main.db says `running` (spec §4.7)."""
    return status == "running" or (ledger is not None and writer_active(ledger))


@dataclass
class _Entry:
    fingerprint: tuple
    computed_at: float
    recent: Recent
    wall: float = 0.0


class FollowCache:
    """One `Recent` per session, recomputed only when the ledger's file fingerprint changed
    and at least `interval` seconds have passed: however many followers poll, a live file is
    read at most once per interval, and a file that did not change is never read again."""

    def __init__(self, interval: float = 1.0, size: int = 64):
        self.interval = interval
        self.size = size
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.computations = 0  # how many reads were made (tests and benchmarks)

    async def get(
        self, key: str, fingerprint: tuple, compute, *, final: bool = False
    ) -> tuple[Recent, float]:
        """(the recent rows, when they were read: time.time()) for `key` at `fingerprint`.
        `final`: the writer is gone, so this version is the last one: never serve an older."""
        entry = self._fresh(key, fingerprint, final)
        if entry is None:
            lock = self._locks.setdefault(key, asyncio.Lock())
            async with lock:
                entry = self._fresh(key, fingerprint, final)
                if entry is None:
                    recent = await compute()
                    self.computations += 1
                    entry = _Entry(fingerprint, time.monotonic(), recent)
                    entry.wall = time.time()
                    self._entries.pop(key, None)
                    self._entries[key] = entry
                    while len(self._entries) > self.size:
                        oldest = next(iter(self._entries))
                        self._entries.pop(oldest)
                        self._locks.pop(oldest, None)
        return entry.recent, entry.wall

    def _fresh(self, key: str, fingerprint: tuple, final: bool = False) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.fingerprint == fingerprint:
            return entry
        if not final and time.monotonic() - entry.computed_at < self.interval:
            return entry  # changed, but read less than an interval ago: serve what was read
        return None
