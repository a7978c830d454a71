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

from datasette_capsem.graph.ledgersql import PACKAGE
from datasette_capsem.ledger.dialect import render_sql
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import TABLES
from datasette_capsem.sqlfiles import load_sql

# Layer -> its table (the registry's `session_layer`), and the layers in the order pages list
# them; `sql/timeline_<layer>.sql` writes each layer's one-line summary.
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


def _layer_sql(schema: LedgerSchema, layer: str) -> str | None:
    """The SELECT of one layer (`sql/timeline_<layer>.sql`), or None when the file lacks it."""
    table = LAYER_TABLES[layer]
    if table not in schema.tables:
        return None
    name = f"timeline_{layer}"
    if layer == "tool" and not (
        "model_calls" in schema.tables and "model_call_id" in schema.tables[table]
    ):
        name = "timeline_tool_alone"
    sql = load_sql(PACKAGE, name).strip()
    return render_sql(sql, schema, table=table, aliases={"tc": table})


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
    fragments = {
        "union": " UNION ALL ".join(parts),
        "where": " WHERE " + " AND ".join(clauses) if clauses else "",
    }
    count = render_sql("SELECT COUNT(*) FROM ({union}){where}", fragments=fragments)
    total = conn.execute(count, params).fetchone()[0]
    sql = render_sql(
        "SELECT at, layer, row_id, text, status, duration_ms, trace_id, event_id "
        "FROM ({union}){where} ORDER BY at, layer, row_id LIMIT :size OFFSET :offset",
        fragments=fragments,
    )
    rows = conn.execute(sql, {**params, "size": query.size, "offset": query.offset})
    names = ("row_id", "text", "status", "duration_ms", "trace_id", "event_id")
    return {
        "rows": [
            {
                "at": at,
                "layer": layer,
                "table": LAYER_TABLES[layer],
                **dict(zip(names, rest, strict=True)),
            }
            for at, layer, *rest in rows
        ],
        "total": total,
        "layers": available,
    }
