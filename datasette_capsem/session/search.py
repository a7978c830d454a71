"""Find an identifier in ledgers that the cross-session index does not cover yet.

The index answers most searches from one table. Ledgers it has not read (new, changed since
the last refresh, or no index at all) are scanned here: in a small thread pool, each ledger
opened through `readonly` (never a plain sqlite3.connect, which could create files
beside a WAL-mode ledger, spec §4.7), with a cap on how many ledgers and how much time one
search may spend, so a search over thousands of sessions stays bounded and says what it skipped.
"""

from __future__ import annotations

import concurrent.futures
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.ledger.schema import LedgerSchema, read_schema
from datasette_capsem.ledger.tables import TABLES
from datasette_capsem.readonly import LedgerUnavailable, open_readonly

HITS_PER_COLUMN = 20
MAX_SCAN_LEDGERS = 1000
SCAN_SECONDS = 3.0
SCAN_WORKERS = 4

# Which tables a value may be found in, per identifier kind (spec §6.1).
ID_KINDS = ("trace_id", "turn_id", "event_id", "call_id", "message_id", "ask_id")
SEARCH_TABLES: dict[str, tuple[str, ...]] = {
    kind: tuple(t.name for t in TABLES if kind in t.search_ids) for kind in ID_KINDS
}


@dataclass
class ScanReport:
    """What a fallback scan covered, so the page can say a result may be partial."""

    wanted: int = 0
    scanned: int = 0
    skipped: int = 0  # beyond the ledger cap or the time budget
    unreadable: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "wanted": self.wanted,
            "scanned": self.scanned,
            "skipped": self.skipped,
            "unreadable": self.unreadable,
            "seconds": round(self.seconds, 3),
            "complete": self.skipped == 0,
        }


def search_ledger(conn: sqlite3.Connection, schema: LedgerSchema, value: str) -> list[dict]:
    """Hits in one ledger: [{id_kind, table_name, row_id, trace_id}]."""
    hits = []
    for kind, tables in SEARCH_TABLES.items():
        for table in tables:
            if not schema.has(table, kind):
                continue
            rows = lsql.run(
                conn,
                "search_column",
                {"value": value, "limit": HITS_PER_COLUMN},
                schema=schema,
                table=table,
                columns=("id", "trace_id"),
                column=kind,
            )
            hits += [
                {"id_kind": kind, "table_name": table, "row_id": r["id"], "trace_id": r["trace_id"]}
                for r in rows
            ]
    return hits


def _scan_one(session_id: str, path: Path, cache_dir: Path, value: str) -> list[dict]:
    conn = open_readonly(path, cache_dir)
    try:
        hits = search_ledger(conn, read_schema(conn), value)
    finally:
        conn.close()
    return [{**hit, "session_id": session_id} for hit in hits]


def scan_ledgers(
    ledgers: Iterable[tuple[str, Path]],
    value: str,
    cache_dir: Path,
    *,
    max_ledgers: int = MAX_SCAN_LEDGERS,
    seconds: float = SCAN_SECONDS,
    workers: int = SCAN_WORKERS,
) -> tuple[list[dict], ScanReport]:
    """Search `value` in (session id, ledger path) pairs, within the caps."""
    pending = list(ledgers)
    report = ScanReport(wanted=len(pending))
    chosen, report.skipped = pending[:max_ledgers], max(len(pending) - max_ledgers, 0)
    started = time.monotonic()
    hits: list[dict] = []
    if not chosen:
        return hits, report
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    try:
        futures = {pool.submit(_scan_one, sid, path, cache_dir, value): sid for sid, path in chosen}
        done, not_done = concurrent.futures.wait(futures, timeout=seconds)
        for future in done:
            try:
                hits += future.result()
                report.scanned += 1
            except (LedgerUnavailable, sqlite3.Error, OSError):
                report.unreadable.append(futures[future])
        report.skipped += len(not_done)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    report.seconds = time.monotonic() - started
    return hits, report
