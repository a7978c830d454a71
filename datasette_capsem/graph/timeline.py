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


def _layer_sql(schema: LedgerSchema, layer: str) -> str | None:
    def c(table: str, column: str, alias: str = "") -> str:
        return _col(schema, table, column, alias)

    if layer == "exec" and "exec_events" in schema.tables:
        t = "exec_events"
        status = f"CASE WHEN {c(t, 'exit_code')} IS NULL THEN 'running' ELSE 'exit ' || {c(t, 'exit_code')} END"
        return (
            f"SELECT {c(t, 'timestamp')} AS at, 'exec' AS layer, '{t}' AS tbl, id AS row_id, "
            f"{c(t, 'command')} AS text, {status} AS status, {c(t, 'duration_ms')} AS duration_ms, "
            f"{c(t, 'trace_id')} AS trace_id, {c(t, 'event_id')} AS event_id FROM {q(t)}"
        )
    if layer == "tool" and "tool_calls" in schema.tables:
        t = "tool_calls"
        joined = "model_calls" in schema.tables and "model_call_id" in schema.tables[t]
        at = c(t, "timestamp", "tc.")
        if joined:
            at = f"COALESCE(NULLIF({at}, ''), mc.{q('timestamp')})"
        join = (
            f" LEFT JOIN {q('model_calls')} AS mc ON mc.id = tc.{q('model_call_id')}"
            if joined
            else ""
        )
        text = f"COALESCE({c(t, 'tool_name', 'tc.')}, '') || ' ' || COALESCE({c(t, 'arguments', 'tc.')}, '')"
        status = f"COALESCE({c(t, 'status', 'tc.')}, {c(t, 'decision', 'tc.')})"
        return (
            f"SELECT {at} AS at, 'tool' AS layer, '{t}' AS tbl, tc.id AS row_id, {text} AS text, "
            f"{status} AS status, {c(t, 'duration_ms', 'tc.')} AS duration_ms, "
            f"{c(t, 'trace_id', 'tc.')} AS trace_id, {c(t, 'event_id', 'tc.')} AS event_id "
            f"FROM {q(t)} AS tc{join}"
        )
    if layer == "net" and "net_events" in schema.tables:
        t = "net_events"
        text = (
            f"COALESCE({c(t, 'method')}, 'CONNECT') || ' ' || COALESCE({c(t, 'domain')}, '') "
            f"|| COALESCE({c(t, 'path')}, '')"
        )
        status = f"COALESCE({c(t, 'decision')}, '') || COALESCE(' ' || {c(t, 'status_code')}, '')"
        return (
            f"SELECT {c(t, 'timestamp')} AS at, 'net' AS layer, '{t}' AS tbl, id AS row_id, "
            f"{text} AS text, {status} AS status, {c(t, 'duration_ms')} AS duration_ms, "
            f"{c(t, 'trace_id')} AS trace_id, {c(t, 'event_id')} AS event_id FROM {q(t)}"
        )
    if layer == "fs" and "fs_events" in schema.tables:
        t = "fs_events"
        return (
            f"SELECT {c(t, 'timestamp')} AS at, 'fs' AS layer, '{t}' AS tbl, id AS row_id, "
            f"COALESCE({c(t, 'action')}, '') || ' ' || COALESCE({c(t, 'path')}, '') AS text, "
            f"{c(t, 'action')} AS status, NULL AS duration_ms, {c(t, 'trace_id')} AS trace_id, "
            f"{c(t, 'event_id')} AS event_id FROM {q(t)}"
        )
    if layer == "model" and "model_calls" in schema.tables:
        t = "model_calls"
        text = (
            f"COALESCE({c(t, 'provider')}, '') || ' ' || COALESCE({c(t, 'model')}, '') || ' · ' "
            f"|| COALESCE({c(t, 'input_tokens')}, 0) || ' in / ' "
            f"|| COALESCE({c(t, 'output_tokens')}, 0) || ' out'"
        )
        return (
            f"SELECT {c(t, 'timestamp')} AS at, 'model' AS layer, '{t}' AS tbl, id AS row_id, "
            f"{text} AS text, {c(t, 'stop_reason')} AS status, {c(t, 'duration_ms')} AS duration_ms, "
            f"{c(t, 'trace_id')} AS trace_id, {c(t, 'event_id')} AS event_id FROM {q(t)}"
        )
    return None


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
