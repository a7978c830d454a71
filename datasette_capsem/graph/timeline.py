"""A session-wide timeline across layers (exec, tool, net, fs, model), like Capsem's
`GET /vms/{id}/timeline` but paged instead of capped at 2,000 rows.

One UNION over the layers the file has, each row `{at, layer, table, row_id, text, status,
duration_ms, trace_id, event_id}`, ordered by time (then layer and row id, so pages are
stable). `text` is the row's one-line summary; it is free text (a command, tool arguments), so
pages redact it under the credential policy like any other free text. Schema-tolerant: a layer
whose table the file lacks is left out, a column it lacks reads as NULL. Never reads a
credential carrier (headers, query strings).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from datasette_capsem.ledger.dialect import quote_identifier as q
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import TABLES

# Layer -> its table (the registry's `session_layer`), and the layers in the order pages list
# them; `_layer_sql` writes each layer's one-line summary.
LAYER_TABLES = {t.session_layer: t.name for t in TABLES if t.session_layer}
LAYERS = ("exec", "tool", "net", "fs", "model")
MAX_PAGE = 1000


@dataclass(frozen=True)
class TimelineQuery:
    layers: tuple[str, ...] = LAYERS
    since: str | None = None
    until: str | None = None
    trace_id: str | None = None
    offset: int = 0
    size: int = 200


def _col(schema: LedgerSchema, table: str, column: str, alias: str = "") -> str:
    if column in schema.tables.get(table, ()):
        return f"{alias}{q(column)}"
    return "NULL"


def _plain_layer(
    schema: LedgerSchema, layer: str, table: str, text: str, status: str, duration: str
) -> str:
    """The SELECT of a layer read from one table alone (every layer but `tool`)."""
    return (
        f"SELECT {_col(schema, table, 'timestamp')} AS at, '{layer}' AS layer, '{table}' AS tbl, "
        f"id AS row_id, {text} AS text, {status} AS status, {duration} AS duration_ms, "
        f"{_col(schema, table, 'trace_id')} AS trace_id, "
        f"{_col(schema, table, 'event_id')} AS event_id FROM {q(table)}"
    )


def _tool_sql(schema: LedgerSchema) -> str:
    """Tool calls; an empty timestamp (rows before 06-22) reads as their model call's."""
    t = "tool_calls"

    def c(column: str) -> str:
        return _col(schema, t, column, "tc.")

    joined = "model_calls" in schema.tables and "model_call_id" in schema.tables[t]
    at = c("timestamp")
    join = ""
    if joined:
        at = f"COALESCE(NULLIF({at}, ''), mc.{q('timestamp')})"
        join = f" LEFT JOIN {q('model_calls')} AS mc ON mc.id = tc.{q('model_call_id')}"
    return (
        f"SELECT {at} AS at, 'tool' AS layer, '{t}' AS tbl, tc.id AS row_id, "
        f"COALESCE({c('tool_name')}, '') || ' ' || COALESCE({c('arguments')}, '') AS text, "
        f"COALESCE({c('status')}, {c('decision')}) AS status, {c('duration_ms')} AS duration_ms, "
        f"{c('trace_id')} AS trace_id, {c('event_id')} AS event_id FROM {q(t)} AS tc{join}"
    )


def _layer_sql(schema: LedgerSchema, layer: str) -> str | None:
    table = LAYER_TABLES[layer]
    if table not in schema.tables:
        return None
    if layer == "tool":
        return _tool_sql(schema)

    def c(column: str) -> str:
        return _col(schema, table, column)

    if layer == "exec":
        status = f"CASE WHEN {c('exit_code')} IS NULL THEN 'running' ELSE 'exit ' || {c('exit_code')} END"
        return _plain_layer(schema, layer, table, c("command"), status, c("duration_ms"))
    if layer == "net":
        text = (
            f"COALESCE({c('method')}, 'CONNECT') || ' ' || COALESCE({c('domain')}, '') "
            f"|| COALESCE({c('path')}, '')"
        )
        status = f"COALESCE({c('decision')}, '') || COALESCE(' ' || {c('status_code')}, '')"
        return _plain_layer(schema, layer, table, text, status, c("duration_ms"))
    if layer == "fs":
        text = f"COALESCE({c('action')}, '') || ' ' || COALESCE({c('path')}, '')"
        return _plain_layer(schema, layer, table, text, c("action"), "NULL")
    text = (
        f"COALESCE({c('provider')}, '') || ' ' || COALESCE({c('model')}, '') || ' · ' "
        f"|| COALESCE({c('input_tokens')}, 0) || ' in / ' "
        f"|| COALESCE({c('output_tokens')}, 0) || ' out'"
    )
    return _plain_layer(schema, layer, table, text, c("stop_reason"), c("duration_ms"))


def timeline(
    conn: sqlite3.Connection, schema: LedgerSchema, query: TimelineQuery
) -> dict[str, Any]:
    """One page of the timeline and the total of rows matching the filters."""
    parts = [sql for layer in query.layers if (sql := _layer_sql(schema, layer))]
    available = [layer for layer in LAYERS if _layer_sql(schema, layer)]
    if not parts:
        return {"rows": [], "total": 0, "layers": available}
    clauses, params = [], {}
    if query.since:
        clauses.append("at >= :since")
        params["since"] = query.since
    if query.until:
        clauses.append("substr(at, 1, :until_len) <= :until")
        params.update(until=query.until, until_len=len(query.until))
    if query.trace_id:
        clauses.append("trace_id = :trace_id")
        params["trace_id"] = query.trace_id
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    union = " UNION ALL ".join(parts)
    total = conn.execute(f"SELECT COUNT(*) FROM ({union}){where}", params).fetchone()[0]
    sql = (
        f"SELECT at, layer, tbl, row_id, text, status, duration_ms, trace_id, event_id "
        f"FROM ({union}){where} ORDER BY at, layer, row_id LIMIT :size OFFSET :offset"
    )
    rows = conn.execute(sql, {**params, "size": query.size, "offset": query.offset})
    names = (
        "at",
        "layer",
        "table",
        "row_id",
        "text",
        "status",
        "duration_ms",
        "trace_id",
        "event_id",
    )
    return {
        "rows": [dict(zip(names, row, strict=True)) for row in rows],
        "total": total,
        "layers": available,
    }
