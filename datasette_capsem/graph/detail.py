"""One node of a trace, in full, for the trace page's detail panel (`node.json?id=…`).

The panel asks for the row behind a node when it is selected: every column of the row, the
ones that matter first and NULLs left out, long cells cut (with the row page one click away),
JSON cells pretty-printed, and the bodies its event id names (small ones decoded inline,
larger ones on request through the body's own JSON URL). Relations and findings come from the
tree the page already holds; nothing here decides a rule.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.bodies import body_summary
from datasette_capsem.graph.drawing import NODE_TYPES
from datasette_capsem.graph.events import INLINE_BODY_BYTES, load_body, pretty_json
from datasette_capsem.graph.values import clip, usable_event_id
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import TABLES

CELL_CHARS = 4000
# Columns shown first, per table, in this order; the rest follow in the file's order.
IMPORTANT = {t.name: t.detail_columns for t in TABLES if t.detail_columns}
JSON_HINTS = ("json", "usage_details", "arguments", "context", "argv")


def parse_node_id(value: str) -> tuple[str, int] | None:
    """`table:row_id` of a row node, or None for anything else (placeholders, turns)."""
    table, _, row_id = value.partition(":")
    if table not in NODE_TYPES or not row_id.isdigit() or len(row_id) > 18:
        return None
    return table, int(row_id)


def _columns(schema: LedgerSchema, table: str) -> list[str]:
    columns = list(schema.tables.get(table, ()))
    if table == "event_body_blobs":  # the bytes come decoded, through load_body
        columns = [c if c != "body" else "body:length" for c in columns]
    return columns


def _ordered(table: str, row: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(fields, cells): the non-empty columns in reading order, and their values keyed by
    column name, so the one credential policy (`redaction.redact_tree`) sees each value
    under its column's name (a carrier such as `query` is hidden whole)."""
    first = [c for c in IMPORTANT.get(table, ()) if c in row]
    rest = [c for c in row if c not in first]
    fields, cells = [], {}
    for name in first + rest:
        value = row[name]
        if value is None or value == "":
            continue
        field: dict[str, Any] = {"name": name, "important": name in first}
        pretty = pretty_json(value) if any(h in name for h in JSON_HINTS) else None
        shown = pretty if pretty is not None else value
        if isinstance(shown, (str, bytes)) and len(shown) > CELL_CHARS:
            field["cut"] = True
        cells[name] = clip(shown, CELL_CHARS)
        if pretty is not None:
            field["json"] = True
        fields.append(field)
    return fields, cells


def load_node(
    conn: sqlite3.Connection, schema: LedgerSchema, table: str, row_id: int
) -> dict[str, Any] | None:
    """The row behind a node, its fields in reading order, and its event's bodies."""
    if table not in schema.tables:
        return None
    found = lsql.run(
        conn,
        "rows_by_id",
        {"ids": lsql.json_list([row_id])},
        schema=schema,
        table=table,
        columns=_columns(schema, table),
    )
    if not found:
        return None
    row = found[0]
    detail: dict[str, Any] = {
        "table": table,
        "row_id": row_id,
        "trace_id": row.get("trace_id"),
        "event_id": row.get("event_id"),
        "bodies": [],
    }
    detail["fields"], detail["cells"] = _ordered(table, row)
    if table == "event_body_blobs":
        body = load_body(conn, row_id)
        detail["bodies"] = [body] if body else []
    elif usable_event_id(row.get("event_id")) and schema.has("event_body_blobs", "event_id"):
        for meta in lsql.run(conn, "event_bodies", {"event_id": row["event_id"]}):
            if meta.get("source_table") not in (None, table):
                continue
            size = meta.get("body_length") or 0
            if size <= INLINE_BODY_BYTES:
                detail["bodies"].append(load_body(conn, meta["id"]) or body_summary(meta, None))
            else:
                detail["bodies"].append({**body_summary(meta, None), "deferred": True})
    return detail
