"""Read the facts the cross-session index keeps from one session.db, whatever its era.

session.db has no version marker and its shape drifted many times (spec §4.5), so the SQL in
`sql/ledger_*.sql` names columns through `{opt:column}` markers (`ledger/dialect.py`): a column
the file has becomes its quoted name, one it lacks becomes NULL. Table names come only from fixed tuples here and from
the file's own `sqlite_master`, always quoted; no value from a ledger is ever put into SQL text.

A fork's ledger starts as a copy of its parent's (spec §1.3). When the parent's ledger is
attached (`Inherited`), every query keeps only the fork's own rows through its `{own}`
placeholder: a row is inherited when the parent's same table holds a row with the same
event_id, or, for a row without a usable event_id (NULL, the migration placeholder, or a table
that has none), the same id, timestamp, trace_id and call_id (VACUUM INTO keeps row ids).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from datasette_capsem.ledger.dialect import quote_identifier, render_sql
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import TABLES
from datasette_capsem.sqlfiles import load_sql

# Tables whose row count is a figure of the session list (name in the index -> ledger table).
COUNTED_TABLES = {t.counted_as: t.name for t in TABLES if t.counted_as}
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
# Row counts among TOTAL_FIELDS (what `inherited_rows` adds up).
COUNTED_FIELDS = ("requests", "model_calls", "tool_calls", *COUNTED_TABLES)


PARENT_SCHEMA = "capsem_parent"  # where a fork's parent ledger is attached
# Columns that, with the row id, identify a copied row that has no usable event_id.
ROW_SIGNATURE = ("id", "timestamp", "trace_id", "call_id")
NOT_AN_EVENT_ID = ("", "000000000000")


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Inherited:
    """The parent ledger of a fork, attached to the fork's connection as PARENT_SCHEMA.

    `copied=True` selects the other side: the rows the fork copied from its parent.
    """

    tables: dict[str, tuple[str, ...]]
    copied: bool = False

    def own(self, schema: LedgerSchema, table: str, alias: str | None = None) -> str:
        """SQL true for the fork's own rows of `table` (or, `copied`, for its copied rows)."""
        shared = set(schema.tables.get(table, ())) & set(self.tables.get(table, ()))
        if "event_id" not in shared and "id" not in shared:
            return "0" if self.copied else "1"
        mine = _row_key(shared, f"{alias}." if alias else "")
        theirs = _row_key(shared, "capsem_p.")
        return render_sql(
            "({mine} {test} (SELECT {theirs} FROM {parent}.{table} AS capsem_p))",
            table=table,
            fragments={
                "mine": mine,
                "test": "IN" if self.copied else "NOT IN",
                "theirs": theirs,
                "parent": PARENT_SCHEMA,
            },
        )


def _row_key(columns: set[str], prefix: str) -> str:
    """A text key no row maps to NULL: 'e' + event_id, else 'r' + the row's signature."""
    signature = " || '|' || ".join(
        f"quote({prefix}{quote_identifier(c)})" for c in ROW_SIGNATURE if c in columns
    )
    by_row = f"'r' || {signature}" if signature else "'r'"
    if "event_id" not in columns:
        return by_row
    event = prefix + quote_identifier("event_id")
    placeholders = ", ".join(quote_literal(v) for v in NOT_AN_EVENT_ID)
    return (
        f"CASE WHEN typeof({event}) = 'text' AND {event} NOT IN ({placeholders}) "
        f"THEN 'e' || {event} ELSE {by_row} END"
    )


class Columns:
    """How one statement over `of` is rendered (`ledger/dialect.py`): `{opt:column}` is a
    column of `of` if the file has it, else SQL NULL; `{table}` is `of`, quoted; `{column}` an
    identifier column; `{own}` the filter keeping a fork's own rows (`1` unless `inherited` is
    given); other `fragments` are SQL text built here.
    """

    def __init__(
        self,
        schema: LedgerSchema,
        of: str,
        alias: str | None = None,
        inherited: Inherited | None = None,
        column: str | None = None,
        **fragments: str,
    ):
        self.schema, self.of, self.alias, self.column = schema, of, alias, column
        own = inherited.own(schema, of, alias) if inherited else "1"
        self.fragments = {"own": own, **fragments}
        # What a rendered template depends on (see `render`); a fork's filter is not memoized.
        columns = schema.tables.get(of, ())
        self.key = (
            None if inherited else (of, alias, column, columns, tuple(sorted(fragments.items())))
        )

    def render(self, sql: str, **fragments: str) -> str:
        return render_sql(
            sql,
            self.schema,
            table=self.of,
            alias=self.alias,
            column=self.column,
            fragments={**self.fragments, **fragments},
        )


@dataclass
class LedgerFacts:
    """Everything the index stores for one ledger."""

    totals: dict[str, Any] = field(default_factory=dict)
    model_usage: list[tuple] = field(default_factory=list)
    tool_calls: list[tuple] = field(default_factory=list)
    failing_domains: list[tuple] = field(default_factory=list)
    ids: list[tuple[str, str, str, int]] = field(default_factory=list)  # value, kind, table, row
    file_totals: dict[str, Any] | None = None  # a fork's whole file, inherited rows included
    copied_ids: list[tuple[str, str, str, int]] = field(default_factory=list)  # a fork's copies
    inherited_rows: int = 0  # rows of a fork's counted tables copied from its parent
    texts: list[tuple] = field(default_factory=list)  # searchable documents (index/text.py)
    policy_events: list[tuple] = field(default_factory=list)  # what policy stopped or flagged


# Rendered extraction SQL by (template, Columns.key): the ledgers of a home share a few
# shapes, and rendering (~45 queries per ledger, each column quoted) was a tenth of reading a
# small ledger. Cleared when full (a home of very many shapes).
RENDERED_MAX = 4096
_rendered: dict[tuple, str] = {}


def render(template: str, columns: Columns, package: str = __package__) -> str:
    """`columns.render(load_sql(package, template))`, once per table shape."""
    return render_once(
        (package, template), columns, lambda: columns.render(load_sql(package, template))
    )


def render_once(name: Hashable, columns: Columns, build: Callable[[], str]) -> str:
    """`build()`, the SQL `name` for `columns`, kept by table shape (`Columns.key`)."""
    if columns.key is None:
        return build()
    key = (name, columns.key)
    sql = _rendered.get(key)
    if sql is None:
        if len(_rendered) >= RENDERED_MAX:
            _rendered.clear()
        sql = _rendered[key] = build()
    return sql


def _query(conn: sqlite3.Connection, name: str, columns: Columns) -> list[sqlite3.Row]:
    return conn.execute(render(name, columns)).fetchall()


def _one(conn: sqlite3.Connection, name: str, columns: Columns) -> dict[str, Any]:
    return dict(_query(conn, name, columns)[0])


def _latest(*values: Any) -> str | None:
    found = [str(value) for value in values if value]
    return max(found) if found else None


def _earliest(*values: Any) -> str | None:
    found = [str(value) for value in values if value]
    return min(found) if found else None


def read_totals(
    conn: sqlite3.Connection, schema: LedgerSchema, inherited: Inherited | None = None
) -> dict[str, Any]:
    """Per-session figures comparable with main.db's rollup columns (spec §3.5); with
    `inherited`, over the fork's own rows only."""
    totals: dict[str, Any] = dict.fromkeys(TOTAL_FIELDS)
    first, last = [], []
    if "net_events" in schema.tables:
        net = _one(conn, "ledger_net_totals", Columns(schema, "net_events", inherited=inherited))
        first.append(net.pop("first_at"))
        last.append(net.pop("last_at"))
        totals.update(net)
    if "model_calls" in schema.tables:
        columns = Columns(schema, "model_calls", inherited=inherited)
        model = _one(conn, "ledger_model_totals", columns)
        first.append(model.pop("first_at"))
        last.append(model.pop("last_at"))
        totals.update(model)
    mcp = 0
    if "tool_calls" in schema.tables:
        tools = _one(conn, "ledger_tool_totals", Columns(schema, "tool_calls", inherited=inherited))
        last.append(tools["last_at"])
        totals["tool_calls"] = tools["tool_calls"]
        mcp += tools["mcp_calls"]
    if "mcp_calls" in schema.tables:
        columns = Columns(schema, "mcp_calls", inherited=inherited)
        legacy = _one(conn, "ledger_count", columns)
        last.append(legacy["last_at"])
        mcp += legacy["n"]
    if "tool_calls" in schema.tables or "mcp_calls" in schema.tables:
        totals["mcp_calls"] = mcp
    for figure, table in COUNTED_TABLES.items():
        if table in schema.tables:
            columns = Columns(schema, table, inherited=inherited)
            counted = _one(conn, "ledger_count", columns)
            totals[figure] = counted["n"]
            last.append(counted["last_at"])
    totals["first_event_at"] = _earliest(*first)
    totals["last_event_at"] = _latest(*last)
    return totals


def read_tool_calls(
    conn: sqlite3.Connection, schema: LedgerSchema, inherited: Inherited | None = None
) -> list[tuple]:
    """(source_table, row_id, tool_name, origin, server, day, duration, decision, status, failed)."""
    rows: list[tuple] = []
    if schema.has("tool_calls", "id") and "model_calls" in schema.tables:
        columns = Columns(schema, "tool_calls", alias="tc", inherited=inherited)
        rows += [("tool_calls", *row) for row in _query(conn, "ledger_tool_calls", columns)]
    if schema.has("mcp_calls", "id"):
        columns = Columns(schema, "mcp_calls", inherited=inherited)
        rows += [("mcp_calls", *row) for row in _query(conn, "ledger_mcp_calls", columns)]
    return rows


def read_failing_domains(
    conn: sqlite3.Connection, schema: LedgerSchema, inherited: Inherited | None = None
) -> list[tuple]:
    rows: list[tuple] = []
    if "net_events" in schema.tables:
        columns = Columns(schema, "net_events", inherited=inherited)
        rows += [tuple(r) for r in _query(conn, "ledger_net_failures", columns)]
    if schema.has("dns_events", "qname"):
        columns = Columns(schema, "dns_events", inherited=inherited)
        rows += [tuple(r) for r in _query(conn, "ledger_dns_failures", columns)]
    return rows


POLICY_CATEGORIES = ("denied_domain", "blocked_tool", "detection", "credential")
# (query, ledger table, what the table needs) of the policy events the index keeps.
POLICY_SOURCES = (
    ("ledger_policy_net", "net_events", ("decision",)),
    ("ledger_policy_dns", "dns_events", ("decision", "qname")),
    ("ledger_policy_tools", "tool_calls", ("tool_name",)),
    ("ledger_policy_tools", "mcp_calls", ("tool_name",)),
    ("ledger_policy_detections", "security_rule_events", ("detection_level",)),
    ("ledger_policy_credentials", "substitution_events", ()),
)


def read_policy_events(
    conn: sqlite3.Connection, schema: LedgerSchema, inherited: Inherited | None = None
) -> list[tuple]:
    """(category, source_table, day, subject, detail, events, first_at, last_at): denied
    domains, blocked tools, detections and credential events, with `inherited` of a fork's
    own rows only."""
    rows: list[tuple] = []
    for name, table, needs in POLICY_SOURCES:
        if not schema.has(table, *needs):
            continue
        columns = Columns(schema, table, inherited=inherited, table_name=quote_literal(table))
        rows += [tuple(row) for row in _query(conn, name, columns)]
    return rows


def _id_query(
    kind: str, table: str, schema: LedgerSchema, inherited: Inherited | None
) -> tuple[str, Columns]:
    if kind in EACH_ROW_KINDS:
        return "ledger_ids_each", Columns(schema, table, inherited=inherited, column=kind)
    if kind == "turn_id":
        return "ledger_ids_turn", Columns(schema, table, inherited=inherited, column=kind)
    # JSON-RPC ids are all digits; real call ids (toolu_…, call_…) are not.
    columns = Columns(schema, table, inherited=inherited, column=kind, numeric_ok="0")
    return "ledger_ids_grouped", columns


ID_KINDS = (*EACH_ROW_KINDS, *GROUPED_KINDS, "turn_id")
DIGITS = "0123456789"


def read_ids(
    conn: sqlite3.Connection, schema: LedgerSchema, inherited: Inherited | None = None
) -> list[tuple[str, str, str, int]]:
    """Every trace, turn, event, call and message id, with the table and row it points at.
    A fork's inherited rows are left to its parent, so a copied id points at the parent.

    A table's identifiers are read in one pass (`_scanned_ids`) where Python compares them
    exactly as the SQL of each kind would (`ledger_ids_*.sql`): a file's own rows, TEXT
    decoded in C (so every value is valid UTF-8 and equal strings are equal bytes), no
    declared collation, integer row ids. Anything else is read with the SQL of each kind."""
    found: list[tuple[str, str, str, int]] = []
    scan = inherited is None and conn.text_factory is str
    collated = _collated_tables(conn) if scan else set()
    for table, columns in sorted(schema.tables.items()):
        if "id" not in columns:
            continue
        kinds = tuple(kind for kind in ID_KINDS if kind in columns)
        if not kinds:
            continue
        scanned = (
            _scanned_ids(conn, schema, table, kinds) if table not in collated and scan else None
        )
        if scanned is not None:
            found += scanned
            continue
        for kind in kinds:
            name, mapping = _id_query(kind, table, schema, inherited)
            found += [(value, kind, table, row_id) for value, row_id in _query(conn, name, mapping)]
    return found


def _collated_tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute(load_sql(__package__, "ledger_collated_tables"))}


def _scanned_ids(
    conn: sqlite3.Connection, schema: LedgerSchema, table: str, kinds: tuple[str, ...]
) -> list[tuple[str, str, str, int]] | None:
    """`read_ids` of one table from one read of its rows (in the order the SQL of each kind
    gives them: rows in table order, grouped values sorted); None where a value would not
    compare in Python as in SQL (a row id that is not an integer, a trace_id beside a turn_id
    that is neither TEXT nor NULL): that table is read with the SQL of each kind."""
    columns = Columns(schema, table)
    projection = ", ".join(quote_identifier(kind) for kind in kinds)
    sql = render_once(
        ("ids-scan", kinds),
        columns,
        lambda: columns.render(load_sql(__package__, "ledger_ids_scan"), columns=projection),
    )
    cursor = conn.cursor()
    cursor.row_factory = None
    rows = cursor.execute(sql).fetchall()
    if any(type(row[0]) is not int for row in rows):
        return None
    found: list[tuple[str, str, str, int]] = []
    for place, kind in enumerate(kinds, 1):
        if kind in EACH_ROW_KINDS:
            found += [
                (value, kind, table, row[0])
                for row in rows
                if type(value := row[place]) is str and value not in NOT_AN_EVENT_ID
            ]
            continue
        first: dict[str, int] = {}
        if kind == "turn_id":
            trace = kinds.index("trace_id") + 1 if "trace_id" in kinds else None
            if trace is not None and any(
                row[trace] is not None and type(row[trace]) is not str for row in rows
            ):
                return None
            chosen = (
                (row[place], row[0])
                for row in rows
                if type(row[place]) is str
                and row[place] != ""
                and (trace is None or row[place] != row[trace])
            )
        else:  # GROUPED_KINDS: all-digit values are JSON-RPC ids (`numeric_ok` is 0)
            chosen = (
                (row[place], row[0])
                for row in rows
                if type(row[place]) is str and row[place].strip(DIGITS) != ""
            )
        for value, row_id in chosen:
            if value not in first or row_id < first[value]:
                first[value] = row_id
        found += [(value, kind, table, first[value]) for value in sorted(first)]
    return found


def read_facts(
    conn: sqlite3.Connection, schema: LedgerSchema, inherited: Inherited | None = None
) -> LedgerFacts:
    """All facts of one ledger; raises sqlite3.Error if the file cannot answer.

    With `inherited` (a fork whose parent ledger is attached), every fact is of the fork's own
    rows; `file_totals` keeps the whole file's totals, which main.db's rollup counts, and
    `copied_ids` the ids of the copied rows (where else they occur, not whose they are).
    """
    conn.row_factory = sqlite3.Row
    facts = LedgerFacts(totals=read_totals(conn, schema, inherited))
    if inherited is not None:
        facts.file_totals = read_totals(conn, schema)
        facts.inherited_rows = sum(
            (facts.file_totals[f] or 0) - (facts.totals[f] or 0) for f in COUNTED_FIELDS
        )
    if "model_calls" in schema.tables:
        columns = Columns(schema, "model_calls", inherited=inherited)
        facts.model_usage = [tuple(row) for row in _query(conn, "ledger_model_usage", columns)]
    facts.tool_calls = read_tool_calls(conn, schema, inherited)
    facts.failing_domains = read_failing_domains(conn, schema, inherited)
    facts.ids = read_ids(conn, schema, inherited)
    facts.policy_events = read_policy_events(conn, schema, inherited)
    if inherited is not None:
        facts.copied_ids = read_ids(conn, schema, replace(inherited, copied=True))
    return facts


def read_parent_tables(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    """Tables and columns of the ledger attached as PARENT_SCHEMA."""
    tables: dict[str, list[str]] = {}
    for table, column in conn.execute(load_sql(__package__, "parent_columns")):
        tables.setdefault(table, []).append(column)
    return {name: tuple(columns) for name, columns in tables.items()}
