"""Everything one event id names: its row, its security rows and its bodies (spec §6.1).

Capsem's own detail panel shows the same for one clicked row (spec §8.2); this page adds the
blake3 check of each body, every row that shares the id (a broken ledger can have several),
and a view of the body chosen by content type.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from array import array
from bisect import bisect_left, bisect_right
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.bodies import body_summary, decode_body
from datasette_capsem.graph.trace_rows import LOOKUP_COLUMNS, PRIMARY_TABLES, pairs_elsewhere
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


def _leading_index_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The columns that some index of `table` starts with (a lookup by them is a search)."""
    indexes = [row[0] for row in conn.execute("SELECT name FROM pragma_index_list(?)", (table,))]
    return {
        row[0]
        for name in indexes
        for row in conn.execute("SELECT name FROM pragma_index_info(?) WHERE seqno = 0", (name,))
    }


def _id_is_rowid(conn: sqlite3.Connection, table: str) -> bool:
    """Whether `table`'s id is its INTEGER PRIMARY KEY (every id an integer row id)."""
    keys = conn.execute(
        "SELECT name, upper(type) FROM pragma_table_info(?) WHERE pk > 0", (table,)
    ).fetchall()
    return keys == [("id", "INTEGER")]


def unindexed_event_tables(conn: sqlite3.Connection, schema: LedgerSchema) -> list[str]:
    """The primary tables with an event id and no index that starts with it (Capsem's
    `tool_calls` and `model_items`): finding an event id there reads the whole table."""
    return [
        table
        for table in PRIMARY_TABLES
        if schema.has(table, "event_id") and "event_id" not in _leading_index_columns(conn, table)
    ]


def unindexed_lookups(conn: sqlite3.Connection, schema: LedgerSchema) -> dict[str, list[str]]:
    """Per table, the columns a trace's rows are found by (`trace_rows.LOOKUP_COLUMNS`: event
    id, trace id, model call id) that no index starts with, in tables whose id is the row id
    (Capsem's `model_items.model_call_id`, and the security tables' and
    `substitution_events`' `trace_id`): each such lookup reads the whole table."""
    found: dict[str, list[str]] = {}
    for table, columns in LOOKUP_COLUMNS.items():
        present = [c for c in columns if schema.has(table, c)]
        if not present or not _id_is_rowid(conn, table):
            continue
        leading = _leading_index_columns(conn, table)
        missing = [c for c in present if c not in leading]
        if missing:
            found[table] = missing
    for table in unindexed_event_tables(conn, schema):  # as before, whatever the id's kind
        if "event_id" not in found.setdefault(table, []):
            found[table].insert(0, "event_id")
    return found


def _hex_key(event_id: Any) -> int | None:
    """A 12-hex-digit event id (Capsem's form, spec §6.1) as a number; None for any other."""
    if isinstance(event_id, str) and len(event_id) == 12 and event_id.isascii():
        try:
            return int(event_id, 16) if event_id == event_id.lower() else None
        except ValueError:
            return None
    return None


def _int_key(value: Any) -> int | None:
    """A model call id as itself (an integer of 64 bits); None for any other value."""
    if type(value) is int and -(2**63) <= value < 2**63:
        return value
    return None


def _text_key(value: Any) -> int | None:
    """Any text (a trace id) as 64 bits of its blake2b: two texts may share a key, so a row
    found by it is checked again in SQL (`trace_rows_located.sql`); None for a non-text."""
    if not isinstance(value, str):
        return None
    digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# How each column's values become the map's numbers: exact for event ids (the uses counted
# from the map) and model call ids; hashed for trace ids (the rows found are checked again).
_KEYS = {"event_id": _hex_key, "model_call_id": _int_key, "trace_id": _text_key}
_Map = tuple[array, array, dict[Any, list[int]]]


class EventLocator:
    """Where the rows of each event id (and, for a trace, of each trace id and model call id)
    are in the tables that have no index on that column: read once per file version
    (`locate_events`), so an event page and a trace's rows find their rows there by row id
    instead of reading those whole tables (seconds from a cold disk on a big ledger).
    Compact: each value as a number (`_KEYS`) sorted beside its row id (16 bytes a row); any
    other value (an older era's, a broken row's) in a small dict."""

    def __init__(self) -> None:
        self.maps: dict[tuple[str, str], _Map] = {}
        # The rule book's pairing across traces of the whole file (spec §4.4; a few rows),
        # by the tool call's row id: what a tool call's event page lists as answered
        # elsewhere, without the whole-file query on each view.
        self.elsewhere: dict[Any, list[dict[str, Any]]] = {}
        # The largest row id read per table: rows written since (a live ledger's map is of
        # an earlier version while the next is read) are looked at by id range, so the map
        # of any earlier version of the file finds every row (ids only grow, spec §4.2).
        self.after: dict[str, int] = {}
        self.current = True  # of the file as it is now (else `elsewhere` is not used)

    @property
    def tables(self) -> dict[str, _Map]:
        """The event id maps, by table."""
        return {table: m for (table, column), m in self.maps.items() if column == "event_id"}

    def add(self, table: str, pairs: list[tuple[Any, int]], column: str = "event_id") -> None:
        """`pairs`: (value, row id) of every row of `table` (a NULL value is never looked for)."""
        key_of = _KEYS[column]
        keyed, other = [], {}
        for value, row_id in pairs:
            key = key_of(value)
            if key is None:
                if value is not None:
                    other.setdefault(value, []).append(row_id)
            else:
                keyed.append((key, row_id))
        keyed.sort()
        top = max((r for _, r in pairs if isinstance(r, int)), default=0)
        self.after[table] = max(self.after.get(table, 0), top)
        self.maps[(table, column)] = (
            array("q", (k for k, _ in keyed)),
            array("q", (r for _, r in keyed)),
            other,
        )

    def _rowids(self, table: str, column: str, value: Any) -> list[int] | None:
        if (table, column) not in self.maps:
            return None
        keys, rows, other = self.maps[(table, column)]
        key = _KEYS[column](value)
        if key is None:
            return sorted(other.get(value, ()))
        return list(rows[bisect_left(keys, key) : bisect_right(keys, key)])

    def rowids(self, table: str, event_id: str, limit: int) -> list[int] | None:
        """The first `limit` row ids of `table` carrying `event_id` (None: not located here)."""
        found = self._rowids(table, "event_id", event_id)
        return None if found is None else found[:limit]

    def holds(self, table: str, column: str) -> bool:
        return (table, column) in self.maps

    def rowids_of(self, table: str, column: str, values: list[Any]) -> list[int] | None:
        """The row ids of `table` whose `column` may be one of `values` (a superset: trace
        ids are hashed), sorted; None for a column it does not hold. Rows written after the
        map was read (ids above `after[table]`) are not in it."""
        if (table, column) not in self.maps:
            return None
        found: set[int] = set()
        for value in dict.fromkeys(values):
            found.update(self._rowids(table, column, value) or ())
        return sorted(found)

    def mapped(self, table: str, column: str) -> int:
        """How many rows of `table` the map of `column` holds (0 for a column it does not)."""
        keys, _, other = self.maps.get((table, column), ((), (), {}))
        return len(keys) + sum(len(ids) for ids in other.values())

    def uses_of(self, table: str, event_ids: list[str]) -> dict[str, int] | None:
        """How many rows of `table` carry each of `event_ids` (those carried at least once),
        for a map of the file as it is now; None for a table it does not hold or an earlier
        version's map (rows written since are not counted in it)."""
        if (table, "event_id") not in self.maps or not self.current:
            return None
        found = {}
        for event_id in dict.fromkeys(event_ids):
            uses = len(self._rowids(table, "event_id", event_id) or ())
            if uses:
                found[event_id] = uses
        return found

    @property
    def rows(self) -> int:
        return sum(len(keys) + len(other) for keys, _, other in self.maps.values())


def locate_events(conn: sqlite3.Connection, schema: LedgerSchema) -> EventLocator:
    """The `EventLocator` of a ledger as it is now (every row of the tables whose lookup
    columns have no index: one read of each such table for all its columns)."""
    locator = EventLocator()
    for table, columns in unindexed_lookups(conn, schema).items():
        sql = lsql.query_text("event_id_map", schema=schema, table=table, columns=columns)
        rows = conn.execute(sql).fetchall()
        for place, column in enumerate(columns, start=1):
            locator.add(table, [(row[place], row[0]) for row in rows], column)
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
