"""How one ledger row is linked to others by the ids Capsem writes: what an event page lists.

A model call lists the tool calls it emitted (`tool_calls.model_call_id`) and the responses it
carried back (`tool_responses.model_call_id`); a tool call shows the model call that emitted it,
the responses that answered it (same call id, same trace, carried no earlier) and the model
calls that consumed them. These are joins by id, shown as links; whether a link is broken is the
rule book's verdict (checks/), never decided here.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.trace_rows import pairs_elsewhere
from datasette_capsem.graph.values import PLACEHOLDER_EVENT_ID
from datasette_capsem.ledger.dialect import render_sql
from datasette_capsem.ledger.schema import LedgerSchema

LIMIT = 200
# Tool calls a model call emitted; tool responses it carried back to the model.
EMITTED = (
    "SELECT id, event_id, call_id, tool_name FROM tool_calls"
    " WHERE model_call_id = :model_call_id ORDER BY id LIMIT :limit"
)
CARRIED = (
    "SELECT id, call_id, trace_id FROM tool_responses"
    " WHERE model_call_id = :model_call_id ORDER BY id LIMIT :limit"
)
MODEL_CALL = "SELECT id, event_id FROM model_calls WHERE id = :id"  # one model call by row id
ROW_EVENT = "SELECT event_id FROM {table} WHERE id = :id"  # {table}: one of lsql.LEDGER_TABLES


def usable_event_id(value: Any) -> str | None:
    """An event id a page can be opened by (not NULL, not the migration placeholder)."""
    if isinstance(value, str) and value and value != PLACEHOLDER_EVENT_ID:
        return value
    return None


def model_call_relations(conn: sqlite3.Connection, schema: LedgerSchema, row_id: Any) -> dict:
    found: dict[str, list[dict]] = {"emitted": [], "carried": []}
    params = {"model_call_id": row_id, "limit": LIMIT}
    if schema.has("tool_calls", "model_call_id") and schema.has("tool_calls", "event_id"):
        found["emitted"] = lsql.fetch(conn, EMITTED, params)
    if schema.has("tool_responses", "model_call_id") and schema.has("tool_responses", "trace_id"):
        found["carried"] = lsql.fetch(conn, CARRIED, params)
    return found


def tool_call_relations(
    conn: sqlite3.Connection,
    schema: LedgerSchema,
    row: dict,
    elsewhere: dict[Any, list[dict]] | None = None,
) -> dict:
    """`elsewhere`: the whole file's pairs across traces by call row id, when read already
    (graph/events.EventLocator); else this row's are read (a query over the whole file)."""
    found: dict[str, Any] = {"emitted_by": None, "answered_by": [], "answered_elsewhere": []}
    model_call_id = row.get("model_call_id")
    if model_call_id is not None and schema.has("model_calls", "event_id"):
        rows = lsql.fetch(conn, MODEL_CALL, {"id": model_call_id})
        found["emitted_by"] = (
            rows[0] if rows else {"id": model_call_id, "event_id": None, "missing": True}
        )
    if (
        row.get("call_id")
        and schema.has("tool_responses", "trace_id")
        and schema.has("model_calls", "event_id")
    ):
        params = {
            "call_id": row["call_id"],
            "trace_id": row.get("trace_id"),
            "model_call_id": model_call_id,
            "limit": LIMIT,
        }
        found["answered_by"] = lsql.run(conn, "relation_answers", params)
    if not found["answered_by"] and row.get("id") is not None:
        found["answered_elsewhere"] = (
            pairs_elsewhere(conn, schema, [], [row["id"]])
            if elsewhere is None
            else list(elsewhere.get(row["id"], ()))
        )
    return found


def call_for(
    conn: sqlite3.Connection,
    schema: LedgerSchema,
    call_id: str,
    trace_id: str | None = None,
    model_call_id: int | None = None,
) -> dict | None:
    """The tool call row a call id names (a response's call): {id, event_id}, or None."""
    if not (schema.has("tool_calls", "call_id") and schema.has("tool_calls", "event_id")):
        return None
    if not (schema.has("tool_calls", "trace_id") and schema.has("tool_calls", "model_call_id")):
        return None
    params = {"call_id": call_id, "trace_id": trace_id, "model_call_id": model_call_id}
    rows = lsql.run(conn, "relation_call_by_id", params)
    return rows[0] if rows else None


def row_event_id(conn: sqlite3.Connection, schema: LedgerSchema, table: str, row_id: int):
    """The event id of one row, or None (no such column, row or usable id)."""
    if table not in lsql.LEDGER_TABLES or not schema.has(table, "event_id"):
        return None
    rows = lsql.fetch(conn, render_sql(ROW_EVENT, table=table), {"id": row_id})
    return usable_event_id(rows[0]["event_id"]) if rows else None
