"""What the session overview page reads from a ledger: counts, providers and traces.

Each function is a sync callback of a sqlite3 connection and asks the `LedgerSchema` first,
so an old file answers with what it has (and a note saying what it lacks), never an error.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.conversation import load_turn_preview
from datasette_capsem.graph.exchanges import is_ambient
from datasette_capsem.graph.trace_rows import SPLIT_PATHS, TRACE_TABLES, pairs_elsewhere
from datasette_capsem.graph.values import clip_row
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import NAMES

# Tables listed first, in this order, on the overview; any other table of the file follows.
TABLE_ORDER = NAMES  # the registry's order (ledger/tables.py)
PROVIDER_COLUMNS = ("provider", "model", "input_tokens", "output_tokens", "estimated_cost_usd")
AMBIENT_LIMIT = 50
MCP_ROW_LIMIT = 200


def table_counts(conn: sqlite3.Connection, schema: LedgerSchema) -> dict[str, int]:
    """Row count of every table of the file, known tables first."""
    names = [t for t in TABLE_ORDER if t in schema.tables]
    names += sorted(t for t in schema.tables if t not in names and not t.startswith("sqlite_"))
    counts = {}
    for table in names:
        found = lsql.run(conn, "count_rows", table=table, file_tables=tuple(schema.tables))
        counts[table] = found[0]["n"]
    return counts


def providers(conn: sqlite3.Connection, schema: LedgerSchema) -> list[dict[str, Any]]:
    if not schema.has("model_calls", *PROVIDER_COLUMNS, "timestamp"):
        return []
    return [clip_row(row) for row in lsql.run(conn, "providers")]


def traces_page(
    conn: sqlite3.Connection, schema: LedgerSchema, offset: int, limit: int
) -> dict[str, Any]:
    """One page of turns and ambient exchanges (newest first), their totals, and notes on
    what the file lacks (see `graph/exchanges.py` for what a turn is)."""
    if not schema.has("model_calls", "trace_id"):
        note = "model_calls has no trace_id column in this file: it has no traces."
        empty = {"traces": [], "total": 0, "turns": 0, "exchanges": 0, "untraced_calls": 0}
        return {**empty, "notes": [note]}
    total = lsql.run(conn, "traces_total")[0]
    rows = lsql.run(conn, "traces_page", {"limit": limit, "offset": offset})
    notes = []
    if total["untraced_calls"]:
        notes.append(f"{total['untraced_calls']} model calls carry no trace_id.")
    turns, exchanges = total["turns"] or 0, total["exchanges"] or 0
    continued = continuations(conn, schema)
    listed = [clip_row(row) for row in rows]
    for row in listed:
        row["continues"] = continued.get((row["trace_id"], row.get("exchange")))
    split = {key[0] for key in continued if key[1] is None}  # UUID traces a split made
    return {
        "traces": listed,
        "total": turns + exchanges,  # entries of the list, for paging
        "turns": turns,
        "user_turns": turns - len(split),  # the writer split some turns into several traces
        "exchanges": exchanges,
        "untraced_calls": total["untraced_calls"] or 0,
        "notes": notes,
    }


def turn_previews(conn: sqlite3.Connection, schema: LedgerSchema, traces: list[dict]) -> None:
    """Add to each listed turn (`traces_page`) the first words of what it was asked and of how
    its reply began (`request_preview`, `response_preview`: free text, masked by the views)."""
    for trace in traces:
        first, last = trace.pop("first_call_id", None), trace.pop("last_call_id", None)
        trace.update(load_turn_preview(conn, schema, first, last))


def continuations(conn: sqlite3.Connection, schema: LedgerSchema) -> dict[tuple, dict]:
    """(trace id, exchange) -> the trace it carries on, for traces and ambient exchanges whose
    results answer calls of an earlier trace the writer split them from: the rule book's own
    pairing (`tool_results_across_traces`). `exchange` is the model call id in the ambient
    trace, None for a UUID trace."""
    found: dict[tuple, dict] = {}
    for pair in pairs_elsewhere(conn, schema, None, None):
        why = SPLIT_PATHS.get(pair["writer_path"])
        trace = pair["trace_id"]
        if why is None or trace is None or trace == pair["call_trace_id"]:
            continue
        key = (trace, pair["consumed_by_model_call"] if is_ambient(str(trace)) else None)
        found.setdefault(key, {"trace_id": pair["call_trace_id"], "why": why})
    return found


def ambient_traces(conn: sqlite3.Connection, schema: LedgerSchema) -> list[dict[str, Any]]:
    """Trace ids of tool and net rows that no model call carries (the process's own trace)."""
    if not schema.has("model_calls", "trace_id"):
        return []
    found: dict[str, dict[str, Any]] = {}
    for table in ("tool_calls", "net_events"):
        if not schema.has(table, "trace_id", "timestamp"):
            continue
        for row in lsql.run(conn, "ambient_traces", {"limit": AMBIENT_LIMIT}, table=table):
            entry = found.setdefault(row["trace_id"], {**clip_row(row), "rows": 0})
            entry["rows"] += row["rows"]
    return sorted(found.values(), key=lambda r: str(r.get("start") or ""), reverse=True)


def legacy_mcp_rows(conn: sqlite3.Connection, schema: LedgerSchema) -> list[dict[str, Any]]:
    """`mcp_calls` rows of an old file, shown as MCP rows on the overview (spec §4.5)."""
    if "mcp_calls" not in schema.tables:
        return []
    columns = TRACE_TABLES["mcp_calls"]
    rows = lsql.run(
        conn,
        "legacy_mcp_calls",
        {"limit": MCP_ROW_LIMIT},
        schema=schema,
        table="mcp_calls",
        columns=columns,
    )
    return [clip_row(row) for row in rows]
