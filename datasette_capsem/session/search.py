"""Find an identifier in ledgers that the cross-session index does not cover yet.

The index answers most searches from one table. Ledgers it has not read (new, changed since
the last refresh, or no index at all) are scanned here: in a small thread pool, each ledger
opened through `readonly` (never a plain sqlite3.connect, which could create files
beside a WAL-mode ledger, spec §4.7), with a cap on how many ledgers and how much time one
search may spend, so a search over thousands of sessions stays bounded and says what it skipped.
Each ledger's schema is kept by its file fingerprint (`readonly.file_fingerprint`): a search
over ledgers that have not changed since the last one reads no schema again.
"""

from __future__ import annotations

import concurrent.futures
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import TABLES
from datasette_capsem.mount.ledger_db import MAX_SHAPES, read_shared_schema
from datasette_capsem.readonly import LedgerUnavailable, file_fingerprint, open_readonly

HITS_PER_COLUMN = 20
MAX_SCAN_LEDGERS = 1000
SCAN_SECONDS = 3.0
SCAN_WORKERS = 4
# Ledger schemas kept by path and file fingerprint, least recently used first out: a few
# scans' worth (each at most the views' 100 ledgers); the schemas themselves are shared by
# every ledger of a shape (`read_shared_schema`), so an entry is a path and two tuples.
SCHEMAS_KEPT = 4096

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
    schemas_read: int = 0  # ledgers whose schema was read (not known for their fingerprint)

    def to_dict(self) -> dict[str, Any]:
        return {
            "wanted": self.wanted,
            "scanned": self.scanned,
            "skipped": self.skipped,
            "unreadable": self.unreadable,
            "seconds": round(self.seconds, 3),
            "complete": self.skipped == 0,
        }


Plan = tuple[tuple[str, str, str], ...]


def search_plan(schema: LedgerSchema) -> Plan:
    """(id kind, table, statement) of each column a search compares in a ledger of `schema`."""
    return tuple(
        (
            kind,
            table,
            lsql.query_text(
                "search_column",
                schema=schema,
                table=table,
                columns=("id", "trace_id"),
                column=kind,
            ),
        )
        for kind, tables in SEARCH_TABLES.items()
        for table in tables
        if schema.has(table, kind)
    )


def search_ledger(
    conn: sqlite3.Connection, schema: LedgerSchema, value: str, plan: Plan | None = None
) -> list[dict]:
    """Hits in one ledger: [{id_kind, table_name, row_id, trace_id}]. `plan`: the
    `search_plan` of `schema`, if known."""
    hits = []
    params = {"value": value, "limit": HITS_PER_COLUMN}
    for kind, table, sql in search_plan(schema) if plan is None else plan:
        hits += [
            {"id_kind": kind, "table_name": table, "row_id": r["id"], "trace_id": r["trace_id"]}
            for r in lsql.fetch(conn, sql, params)
        ]
    return hits


class SchemaCache:
    """Each ledger's schema by its path and file fingerprint (size and mtime of the file and
    its WAL): read again only once the file changed. Shared by the scan's threads."""

    def __init__(self, kept: int = SCHEMAS_KEPT):
        self._kept = kept
        self._lock = threading.Lock()
        self._schemas: OrderedDict[str, tuple[tuple, LedgerSchema, Plan]] = OrderedDict()
        # The search plan of each schema shape (schemas are shared: `read_shared_schema`),
        # by the schema's identity; the schema is held so its id is not reused.
        self._plans: dict[int, tuple[LedgerSchema, Plan]] = {}

    def schema(self, path: Path, conn: sqlite3.Connection, fingerprint: tuple) -> tuple:
        """(the schema of the ledger at `path`, opened as `conn`, its search plan, whether
        it was read now). `fingerprint` was taken before `conn` was opened: a file changed in
        between is read again at the next scan, never kept as older than it is."""
        key = str(path)
        with self._lock:
            held = self._schemas.get(key)
            if held is not None and held[0] == fingerprint:
                self._schemas.move_to_end(key)
                return held[1], held[2], False
        schema = read_shared_schema(conn)
        with self._lock:
            shape = self._plans.get(id(schema))
        plan = shape[1] if shape is not None and shape[0] is schema else search_plan(schema)
        with self._lock:
            if len(self._plans) >= MAX_SHAPES:
                self._plans.clear()
            self._plans[id(schema)] = (schema, plan)
            self._schemas[key] = (fingerprint, schema, plan)
            self._schemas.move_to_end(key)
            while len(self._schemas) > self._kept:
                self._schemas.popitem(last=False)
        return schema, plan, True

    def clear(self) -> None:
        with self._lock:
            self._schemas.clear()
            self._plans.clear()


schemas = SchemaCache()


def _scan_one(session_id: str, path: Path, cache_dir: Path, value: str) -> tuple[list[dict], bool]:
    """The hits in one ledger, and whether its schema was read (not kept for its version)."""
    fingerprint = file_fingerprint(path)
    conn = open_readonly(path, cache_dir)
    try:
        schema, plan, read = schemas.schema(path, conn, fingerprint)
        hits = search_ledger(conn, schema, value, plan)
    finally:
        conn.close()
    return [{**hit, "session_id": session_id} for hit in hits], read


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
                found, read = future.result()
                hits += found
                report.scanned += 1
                report.schemas_read += read
            except (LedgerUnavailable, sqlite3.Error, OSError):
                report.unreadable.append(futures[future])
        report.skipped += len(not_done)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    report.seconds = time.monotonic() - started
    return hits, report
