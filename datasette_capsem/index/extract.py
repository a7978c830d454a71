"""Read the facts the cross-session index keeps from one session.db, whatever its era.

session.db has no version marker and its shape drifted many times (spec §4.5), so the SQL in
`sql/ledger_*.sql` names columns through placeholders: a column the file has becomes its
quoted name, one it lacks becomes NULL. Table names come only from fixed tuples here and from
the file's own `sqlite_master`, always quoted; no value from a ledger is ever put into SQL text.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any

from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.sqlfiles import load_sql

# Tables whose row count is a figure of the session list (name in the index -> ledger table).
COUNTED_TABLES = {
    "file_events": "fs_events",
    "exec_events": "exec_events",
    "audit_events": "audit_events",
    "dns_queries": "dns_events",
}
# Identifier kinds of the lookup table, and how their rows are read.
EACH_ROW_KINDS = ("event_id", "message_id")
GROUPED_KINDS = ("trace_id", "call_id")
TOTAL_FIELDS = (
    "requests",
    "allowed_requests",
    "denied_requests",
    "error_requests",
    "model_calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "thinking_tokens",
    "cost_usd",
    "tool_calls",
    "mcp_calls",
    "file_events",
    "exec_events",
    "audit_events",
    "dns_queries",
    "first_event_at",
    "last_event_at",
)


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Columns(dict):
    """`str.format_map` mapping: a column of `table` if the file has it, else SQL NULL."""

    def __init__(self, schema: LedgerSchema, of: str, alias: str | None = None, **extra: str):
        super().__init__(extra)
        self.present = set(schema.tables.get(of, ()))
        self.prefix = f"{alias}." if alias else ""

    def __missing__(self, column: str) -> str:
        if column in self.present:
            return self.prefix + quote_identifier(column)
        return "NULL"


@dataclass
class LedgerFacts:
    """Everything the index stores for one ledger."""

    totals: dict[str, Any] = field(default_factory=dict)
    model_usage: list[tuple] = field(default_factory=list)
    tool_calls: list[tuple] = field(default_factory=list)
    failing_domains: list[tuple] = field(default_factory=list)
    ids: list[tuple[str, str, str, int]] = field(default_factory=list)  # value, kind, table, row


def _query(conn: sqlite3.Connection, name: str, columns: Columns) -> list[sqlite3.Row]:
    sql = load_sql(__package__, name).format_map(columns)
    return conn.execute(sql).fetchall()


def _one(conn: sqlite3.Connection, name: str, columns: Columns) -> dict[str, Any]:
    return dict(_query(conn, name, columns)[0])


def _latest(*values: Any) -> str | None:
    found = [str(value) for value in values if value]
    return max(found) if found else None


def _earliest(*values: Any) -> str | None:
    found = [str(value) for value in values if value]
    return min(found) if found else None


def read_totals(conn: sqlite3.Connection, schema: LedgerSchema) -> dict[str, Any]:
    """Per-session figures comparable with main.db's rollup columns (spec §3.5)."""
    totals: dict[str, Any] = dict.fromkeys(TOTAL_FIELDS)
    first, last = [], []
    if "net_events" in schema.tables:
        net = _one(conn, "ledger_net_totals", Columns(schema, "net_events"))
        first.append(net.pop("first_at"))
        last.append(net.pop("last_at"))
        totals.update(net)
    if "model_calls" in schema.tables:
        model = _one(conn, "ledger_model_totals", Columns(schema, "model_calls"))
        first.append(model.pop("first_at"))
        last.append(model.pop("last_at"))
        totals.update(model)
    mcp = 0
    if "tool_calls" in schema.tables:
        tools = _one(conn, "ledger_tool_totals", Columns(schema, "tool_calls"))
        last.append(tools["last_at"])
        totals["tool_calls"] = tools["tool_calls"]
        mcp += tools["mcp_calls"]
    if "mcp_calls" in schema.tables:
        legacy = _one(
            conn, "ledger_count", Columns(schema, "mcp_calls", table=quote_identifier("mcp_calls"))
        )
        last.append(legacy["last_at"])
        mcp += legacy["n"]
    if "tool_calls" in schema.tables or "mcp_calls" in schema.tables:
        totals["mcp_calls"] = mcp
    for figure, table in COUNTED_TABLES.items():
        if table in schema.tables:
            counted = _one(
                conn, "ledger_count", Columns(schema, table, table=quote_identifier(table))
            )
            totals[figure] = counted["n"]
            last.append(counted["last_at"])
    totals["first_event_at"] = _earliest(*first)
    totals["last_event_at"] = _latest(*last)
    return totals


def read_tool_calls(conn: sqlite3.Connection, schema: LedgerSchema) -> list[tuple]:
    """(source_table, row_id, tool_name, origin, server, day, duration, decision, status, failed)."""
    rows: list[tuple] = []
    if schema.has("tool_calls", "id") and "model_calls" in schema.tables:
        columns = Columns(schema, "tool_calls", alias="tc")
        rows += [("tool_calls", *row) for row in _query(conn, "ledger_tool_calls", columns)]
    if schema.has("mcp_calls", "id"):
        columns = Columns(schema, "mcp_calls")
        rows += [("mcp_calls", *row) for row in _query(conn, "ledger_mcp_calls", columns)]
    return rows


def read_failing_domains(conn: sqlite3.Connection, schema: LedgerSchema) -> list[tuple]:
    rows: list[tuple] = []
    if "net_events" in schema.tables:
        rows += [
            tuple(r) for r in _query(conn, "ledger_net_failures", Columns(schema, "net_events"))
        ]
    if schema.has("dns_events", "qname"):
        rows += [
            tuple(r) for r in _query(conn, "ledger_dns_failures", Columns(schema, "dns_events"))
        ]
    return rows


def _id_query(kind: str, table: str, schema: LedgerSchema) -> tuple[str, Columns]:
    extra = {"table": quote_identifier(table), "column": quote_identifier(kind)}
    if kind in EACH_ROW_KINDS:
        return "ledger_ids_each", Columns(schema, table, **extra)
    if kind == "turn_id":
        return "ledger_ids_turn", Columns(schema, table, **extra)
    # JSON-RPC ids are all digits; real call ids (toolu_…, call_…) are not.
    return "ledger_ids_grouped", Columns(schema, table, numeric_ok="0", **extra)


def read_ids(conn: sqlite3.Connection, schema: LedgerSchema) -> list[tuple[str, str, str, int]]:
    """Every trace, turn, event, call and message id, with the table and row it points at."""
    found: list[tuple[str, str, str, int]] = []
    for table, columns in sorted(schema.tables.items()):
        if "id" not in columns:
            continue
        for kind in (*EACH_ROW_KINDS, *GROUPED_KINDS, "turn_id"):
            if kind not in columns:
                continue
            name, mapping = _id_query(kind, table, schema)
            found += [(value, kind, table, row_id) for value, row_id in _query(conn, name, mapping)]
    return found


def read_facts(conn: sqlite3.Connection, schema: LedgerSchema) -> LedgerFacts:
    """All facts of one ledger; raises sqlite3.Error if the file cannot answer."""
    conn.row_factory = sqlite3.Row
    facts = LedgerFacts(totals=read_totals(conn, schema))
    if "model_calls" in schema.tables:
        usage = _query(conn, "ledger_model_usage", Columns(schema, "model_calls"))
        facts.model_usage = [tuple(row) for row in usage]
    facts.tool_calls = read_tool_calls(conn, schema)
    facts.failing_domains = read_failing_domains(conn, schema)
    facts.ids = read_ids(conn, schema)
    return facts
