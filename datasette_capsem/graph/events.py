"""Everything one event id names: its row, its security rows and its bodies (spec §6.1).

Capsem's own detail panel shows the same for one clicked row (spec §8.2); this page adds the
blake3 check of each body, every row that shares the id (a broken ledger can have several),
and a view of the body chosen by content type.
"""

from __future__ import annotations

import json
import sqlite3
from array import array
from bisect import bisect_left, bisect_right
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.bodies import body_summary, decode_body
from datasette_capsem.graph.trace_rows import PRIMARY_TABLES, pairs_elsewhere
from datasette_capsem.graph.values import clip
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import joined_by

ROWS_PER_TABLE = 50  # '000000000000' (the migration placeholder) is shared by many rows
SECURITY_ROWS = 200
CELL_CHARS = 2000  # longer cells are cut on the page, with a link to the row
INLINE_BODY_BYTES = 64 * 1024  # larger bodies load on request
SECURITY_TABLES = tuple(table.name for table in joined_by("event_id"))
JSON_COLUMNS = ("rule_json", "event_json", "context_json")


def _cells(row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Cells cut to `CELL_CHARS` (binary as hex), and the names of the cut ones."""
    cut = []
    shown = {}
    for name, value in row.items():
        shown[name] = clip(value, CELL_CHARS)
        too_long = isinstance(value, (str, bytes)) and len(value) > CELL_CHARS
        if too_long or isinstance(value, bytes):
            cut.append(name)
    return shown, cut


def pretty_json(value: Any) -> str | None:
    """JSON text indented for reading; None when the value is not JSON."""
    if not isinstance(value, str):
        return None
    try:
        return json.dumps(json.loads(value), indent=2, ensure_ascii=False)[:200_000]
    except (ValueError, RecursionError):
        return None


def unindexed_event_tables(conn: sqlite3.Connection, schema: LedgerSchema) -> list[str]:
    """The primary tables with an event id and no index that starts with it (Capsem's
    `tool_calls` and `model_items`): finding an event id there reads the whole table."""
    unindexed = []
    for table in PRIMARY_TABLES:
        if not schema.has(table, "event_id"):
            continue
        indexes = [
            row[0] for row in conn.execute("SELECT name FROM pragma_index_list(?)", (table,))
        ]
        leading = {
            row[0]
            for name in indexes
            for row in conn.execute(
                "SELECT name FROM pragma_index_info(?) WHERE seqno = 0", (name,)
            )
        }
        if "event_id" not in leading:
            unindexed.append(table)
    return unindexed


def _hex_key(event_id: Any) -> int | None:
    """A 12-hex-digit event id (Capsem's form, spec §6.1) as a number; None for any other."""
    if isinstance(event_id, str) and len(event_id) == 12 and event_id.isascii():
        try:
            return int(event_id, 16) if event_id == event_id.lower() else None
        except ValueError:
            return None
    return None


class EventLocator:
    """Where the rows of each event id are in the tables that have no index on event_id:
    read once per file version (`locate_events`), so an event page finds its rows there by
    row id instead of reading those whole tables (seconds from a cold disk on a big ledger).
    Compact: Capsem's 12-hex-digit ids as sorted numbers beside their row ids (16 bytes a
    row); any other id (an older era's, a broken row's) in a small dict."""

    def __init__(self) -> None:
        self.tables: dict[str, tuple[array, array, dict[Any, list[int]]]] = {}
        # The rule book's pairing across traces of the whole file (spec §4.4; a few rows),
        # by the tool call's row id: what a tool call's event page lists as answered
        # elsewhere, without the whole-file query on each view.
        self.elsewhere: dict[Any, list[dict[str, Any]]] = {}
        # The largest row id read per table: rows written since (a live ledger's map is of
        # an earlier version while the next is read) are looked at by id range, so the map
        # of any earlier version of the file finds every row (ids only grow, spec §4.2).
        self.after: dict[str, int] = {}
        self.current = True  # of the file as it is now (else `elsewhere` is not used)

    def add(self, table: str, pairs: list[tuple[Any, int]]) -> None:
        keyed, other = [], {}
        for event_id, row_id in pairs:
            key = _hex_key(event_id)
            if key is None:
                other.setdefault(event_id, []).append(row_id)
            else:
                keyed.append((key, row_id))
        keyed.sort()
        self.after[table] = max((r for _, r in pairs if isinstance(r, int)), default=0)
        self.tables[table] = (
            array("q", (k for k, _ in keyed)),
            array("q", (r for _, r in keyed)),
            other,
        )

    def rowids(self, table: str, event_id: str, limit: int) -> list[int] | None:
        """The first `limit` row ids of `table` carrying `event_id` (None: not located here)."""
        if table not in self.tables:
            return None
        keys, rows, other = self.tables[table]
        key = _hex_key(event_id)
        if key is None:
            return sorted(other.get(event_id, ()))[:limit]
        start, end = bisect_left(keys, key), bisect_right(keys, key)
        return list(rows[start : min(end, start + limit)])

    def uses_of(self, table: str, event_ids: list[str]) -> dict[str, int] | None:
        """How many rows of `table` carry each of `event_ids` (those carried at least once),
        for a map of the file as it is now; None for a table it does not hold or an earlier
        version's map (rows written since are not counted in it)."""
        if table not in self.tables or not self.current:
            return None
        keys, _, other = self.tables[table]
        found = {}
        for event_id in dict.fromkeys(event_ids):
            key = _hex_key(event_id)
            if key is None:
                uses = len(other.get(event_id, ()))
            else:
                uses = bisect_right(keys, key) - bisect_left(keys, key)
            if uses:
                found[event_id] = uses
        return found

    @property
    def rows(self) -> int:
        return sum(len(keys) + len(other) for keys, _, other in self.tables.values())


def locate_events(conn: sqlite3.Connection, schema: LedgerSchema) -> EventLocator:
    """The `EventLocator` of a ledger as it is now (every row of the unindexed tables)."""
    locator = EventLocator()
    for table in unindexed_event_tables(conn, schema):
        pairs = [(r[0], r[1]) for r in conn.execute(lsql.query_text("event_id_map", table=table))]
        locator.add(table, pairs)
    for pair in pairs_elsewhere(conn, schema, None, None):
        locator.elsewhere.setdefault(pair.get("call_row"), []).append(pair)
    return locator


def event_rows(
    conn: sqlite3.Connection,
    schema: LedgerSchema,
    event_id: str,
    locator: EventLocator | None = None,
) -> list[dict]:
    """Primary rows carrying the event id: [{table, row_id, cells, cut}]; the tables
    `locator` holds are read by the row ids it found."""
    found = []
    for table in PRIMARY_TABLES:
        if not schema.has(table, "event_id"):
            continue
        params = {"event_id": event_id, "limit": ROWS_PER_TABLE}
        ids = locator.rowids(table, event_id, ROWS_PER_TABLE) if locator is not None else None
        if ids is not None:
            params["ids"], params["after"] = json.dumps(ids), locator.after.get(table, 0)
        name = "event_rows" if ids is None else "event_rows_by_id"
        for row in lsql.run(conn, name, params, table=table):
            cells, cut = _cells(row)
            found.append({"table": table, "row_id": row.get("id"), "cells": cells, "cut": cut})
    return found


def security_rows(conn: sqlite3.Connection, schema: LedgerSchema, event_id: str) -> list[dict]:
    """Security rule, decision and ask rows of the event, JSON columns pretty-printed."""
    found = []
    for table in SECURITY_TABLES:
        if not schema.has(table, "event_id"):
            continue
        params = {"event_id": event_id, "limit": SECURITY_ROWS}
        for row in lsql.run(conn, "event_rows", params, table=table):
            cells, cut = _cells({k: v for k, v in row.items() if k not in JSON_COLUMNS})
            pretty = {
                k: pretty_json(row[k]) or clip(row[k], CELL_CHARS)
                for k in JSON_COLUMNS
                if k in row and row[k] is not None
            }
            found.append(
                {
                    "table": table,
                    "row_id": row.get("id"),
                    "cells": cells,
                    "cut": cut,
                    "json": pretty,
                }
            )
    return found


def event_bodies(conn: sqlite3.Connection, schema: LedgerSchema, event_id: str) -> list[dict]:
    """Body blobs of the event: small ones decoded and hash-checked, large ones deferred."""
    if not schema.has("event_body_blobs", "event_id", "body"):
        return []
    found = []
    for meta in lsql.run(conn, "event_bodies", {"event_id": event_id}):
        size = meta.get("body_length") or 0
        if size <= INLINE_BODY_BYTES:
            found.append(load_body(conn, meta["id"]) or body_summary(meta, None))
        else:
            found.append({**body_summary(meta, None), "deferred": True})
    return found


def load_body(conn: sqlite3.Connection, blob_id: int) -> dict[str, Any] | None:
    """One blob: sizes, flags, hash verdict and the decoded view."""
    rows = lsql.run(conn, "body_by_id", {"id": blob_id})
    if not rows:
        return None
    row = rows[0]
    data = row.pop("body")
    data = b"" if data is None else bytes(data)
    summary = body_summary(row, data)
    return {
        **summary,
        "event_type": row.get("event_type"),
        "created_at": row.get("created_at"),
        "deferred": False,
        "view": decode_body(data, row.get("content_type")),
    }


def raw_body(conn: sqlite3.Connection, blob_id: int) -> dict[str, Any] | None:
    """The stored bytes of one blob with its event id and content type, for a download."""
    rows = lsql.run(conn, "body_by_id", {"id": blob_id})
    if not rows:
        return None
    data = rows[0].get("body")
    return {
        "body": b"" if data is None else bytes(data),
        "event_id": rows[0].get("event_id"),
        "content_type": rows[0].get("content_type"),
    }


def body_meta(conn: sqlite3.Connection, blob_id: int) -> dict[str, Any] | None:
    """Owner event, content type and size of one blob, without reading its bytes."""
    rows = lsql.run(conn, "body_meta", {"id": blob_id})
    return rows[0] if rows else None


def body_chunk(conn: sqlite3.Connection, blob_id: int, offset: int, size: int) -> bytes:
    """`size` bytes of one blob from `offset` (0-based), for a streamed download."""
    rows = lsql.run(conn, "body_chunk", {"id": blob_id, "offset": offset + 1, "size": size})
    chunk = rows[0]["chunk"] if rows else None
    return b"" if chunk is None else bytes(chunk)


def load_event(
    conn: sqlite3.Connection,
    schema: LedgerSchema,
    event_id: str,
    locator: EventLocator | None = None,
) -> dict[str, Any]:
    return {
        "rows": event_rows(conn, schema, event_id, locator),
        "security": security_rows(conn, schema, event_id),
        "bodies": event_bodies(conn, schema, event_id),
    }
