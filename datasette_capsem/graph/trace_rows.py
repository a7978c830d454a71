"""Every ledger row of one trace, read in one pass, plus what its broken links point at.

The graph, the waterfall and the OTLP export all start from a `TraceRows`. Loading is a sync
function of a sqlite3 connection so the same code serves Datasette (`execute_fn`) and the CLI.
Only short projections are read: previews are cut in SQL and blob bodies are never selected
(only their length), because a model call's "preview" is the whole request (spec §4.4).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from datasette_capsem import redaction
from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.timeparse import parse_ms
from datasette_capsem.graph.values import as_float, clip_row, usable_event_id
from datasette_capsem.ledger import tables as kinds
from datasette_capsem.ledger.bodies import UNVERIFIABLE, hash_verdict
from datasette_capsem.ledger.dialect import render_sql
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.ledger.tables import TABLE, TABLES, joined_by
from datasette_capsem.queries import spec_for

# The columns a trace reads per table, how each table joins a trace, and which tables a
# security row's event type points at: all from the registry (ledger/tables.py).
MODEL_CALL_COLUMNS = TABLE["model_calls"].trace_columns
TOOL_CALL_COLUMNS = TABLE["tool_calls"].trace_columns
TOOL_RESPONSE_COLUMNS = TABLE["tool_responses"].trace_columns
MODEL_ITEM_COLUMNS = TABLE["model_items"].trace_columns
# Tables joined to a trace only by trace_id, with the columns the pages show.
TRACE_TABLES: dict[str, tuple[str, ...]] = {t.name: t.trace_columns for t in joined_by("trace_id")}
# Tables joined to a trace's rows by event_id.
SECURITY_TABLES: dict[str, tuple[str, ...]] = {
    t.name: t.trace_columns for t in joined_by("event_id")
}
BODY_COLUMNS = TABLE["event_body_blobs"].trace_columns
# Primary tables whose rows carry an event_id that security rows and blobs join to.
PRIMARY_TABLES = tuple(table.name for table in TABLES if table.primary)


def _lookup_columns() -> dict[str, tuple[str, ...]]:
    """The columns a trace's rows are found by, per table (its event ids' uses and presence,
    its trace id, its model calls' ids): a big ledger's map (graph/events.EventLocator) holds
    those no index starts with, so no lookup of a trace reads a whole table."""
    found: dict[str, list[str]] = {}
    for table in PRIMARY_TABLES:
        found.setdefault(table, []).append("event_id")
    for table in ("tool_calls", "tool_responses", "model_items"):  # trace_children.sql
        found.setdefault(table, []).extend(("trace_id", "model_call_id"))
    for table in TRACE_TABLES:  # trace_rows.sql
        found.setdefault(table, []).append("trace_id")
    for table in (*SECURITY_TABLES, "event_body_blobs"):  # trace_joined.sql
        found.setdefault(table, []).extend(("event_id", "trace_id"))
    return {table: tuple(dict.fromkeys(columns)) for table, columns in found.items()}


LOOKUP_COLUMNS = _lookup_columns()
# Spec §6.2 check 11: which primary table a security event type points at.
EVENT_TYPE_TABLES: dict[str, str] = {
    event_type: table.name for table in TABLES for event_type in table.event_types
}

START_KEY = "_start_ms"  # parsed start of a row, added by the loader
# A lookup through a map reads its rows by row id, page by page: past one row in SCAN_SHARE of
# the table (a trace holding half the security rows, the ambient one), one read of the whole
# table in order costs less, and is made instead.
SCAN_SHARE = 8
HASH_BUDGET_BYTES = 16 * 1024 * 1024  # bodies hashed per trace; the event page checks the rest


@dataclass
class TraceRows:
    """The rows of one trace, by table, and lookups that explain its broken links."""

    trace_id: str
    schema: LedgerSchema
    model_calls: list[dict] = field(default_factory=list)
    tool_calls: list[dict] = field(default_factory=list)
    tool_responses: list[dict] = field(default_factory=list)
    model_items: list[dict] = field(default_factory=list)
    other: dict[str, list[dict]] = field(default_factory=dict)
    security: dict[str, list[dict]] = field(default_factory=dict)
    bodies: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Model calls referenced from this trace but not in it: id -> row, or None when missing.
    outside_model_calls: dict[int, dict | None] = field(default_factory=dict)
    # table -> event ids (among those this trace references) that have a row in that table.
    present_event_ids: dict[str, set[str]] = field(default_factory=dict)
    present_response_call_ids: set[str] = field(default_factory=set)
    present_exec_ids: set[int] = field(default_factory=set)
    # Pairs the writer split across traces (spec §4.4), as the rule book's
    # tool_results_across_traces rows: by this trace's response id, and by this trace's call id.
    paired_elsewhere: dict[Any, dict] = field(default_factory=dict)
    answered_elsewhere: dict[Any, list[dict]] = field(default_factory=dict)
    # event id -> how many rows of any primary table carry it (only ids this trace uses).
    event_id_uses: dict[str, int] = field(default_factory=dict)
    body_hash: dict[int, str] = field(default_factory=dict)  # blob id -> ledger.bodies verdict
    exchange: int | None = None  # the one model call these rows were scoped to, if any

    @property
    def empty(self) -> bool:
        tables = (self.model_calls, self.tool_calls, self.tool_responses, self.model_items)
        return not any(tables) and not any(self.other.values()) and not any(self.security.values())

    def primary_rows(self) -> dict[str, list[dict]]:
        """Rows that carry their own event_id, by table."""
        found = {t.name: getattr(self, t.name) for t in joined_by("spine") if t.primary}
        found.update(self.other)
        return found

    def row_count(self) -> int:
        counted = len(self.model_calls) + len(self.tool_calls) + len(self.tool_responses)
        counted += len(self.model_items) + len(self.bodies)
        counted += sum(len(rows) for rows in self.other.values())
        return counted + sum(len(rows) for rows in self.security.values())


def _without_free_text(table: str, rows: list[dict]) -> list[dict]:
    hidden = []
    for row in rows:
        copy = dict(row)
        for name, value in row.items():
            if value is not None and kinds.column_kind("ledger", table, name) in (
                kinds.FREE_TEXT,
                kinds.CARRIER,
            ):
                copy[name] = redaction.HIDDEN
        hidden.append(copy)
    return hidden


def without_free_text(rows: TraceRows) -> TraceRows:
    """`rows` with every free-text and carrier column hidden whole (`hide_free_text`): what
    the trace's drawing, tree, labels and OTLP spans are built from for a reader who may see
    no free text, so no label (`dns {qname}`, `{action} {path}`) carries any."""
    outside = {
        key: _without_free_text("model_calls", [row])[0] if row is not None else None
        for key, row in rows.outside_model_calls.items()
    }
    return replace(
        rows,
        model_calls=_without_free_text("model_calls", rows.model_calls),
        tool_calls=_without_free_text("tool_calls", rows.tool_calls),
        tool_responses=_without_free_text("tool_responses", rows.tool_responses),
        model_items=_without_free_text("model_items", rows.model_items),
        other={t: _without_free_text(t, found) for t, found in rows.other.items()},
        security={t: _without_free_text(t, found) for t, found in rows.security.items()},
        bodies=_without_free_text("event_body_blobs", rows.bodies),
        outside_model_calls=outside,
    )


def _fetch(
    conn, name: str, schema: LedgerSchema, table: str, columns, params, **markers
) -> list[dict]:
    """Rows, cut to size, each with its start time parsed once (`START_KEY`)."""
    rows = lsql.run(conn, name, params, schema=schema, table=table, columns=columns, **markers)
    found = []
    for row in rows:
        row = clip_row(row)
        row[START_KEY] = _start_ms(row)
        found.append(row)
    return found


def _start_ms(row: dict[str, Any]) -> float | None:
    if "timestamp_unix_ms" in row:
        return as_float(row.get("timestamp_unix_ms"))
    return parse_ms(row.get("timestamp") if "timestamp" in row else row.get("created_at"))


class Locator(Protocol):
    """A big ledger's map of the values of its columns without an index, read once per file
    version (graph/events.EventLocator): what `load_trace` finds rows with, for a map of the
    file as it is now (`current`)."""

    current: bool
    after: dict[str, int]
    elsewhere: dict[Any, list[dict[str, Any]]]

    def holds(self, table: str, column: str) -> bool: ...

    def rowids_of(self, table: str, column: str, values: list[Any]) -> list[int] | None: ...

    def mapped(self, table: str, column: str) -> int: ...

    def uses_of(self, table: str, event_ids: list[str]) -> dict[str, int] | None: ...


def load_trace(
    conn: sqlite3.Connection,
    schema: LedgerSchema,
    trace_id: str,
    locator: Locator | None = None,
) -> TraceRows:
    """Read one trace; an unknown trace id gives an empty `TraceRows`. `locator`: a big
    ledger's map of the file as it is now; with it, a lookup by a column no index starts
    with (each a read of the whole table) is made by the row ids it holds instead."""
    if locator is not None and not locator.current:
        locator = None  # rows written or changed since it was read are not in it
    rows = TraceRows(trace_id=trace_id, schema=schema)
    _load_calls(conn, rows, locator)
    _load_other(conn, rows, locator)
    _load_joined(conn, rows, locator)
    _load_link_targets(conn, rows, locator)
    _check_body_hashes(conn, rows)
    return rows


def _lookup(
    conn,
    rows: TraceRows,
    locate: tuple[str, tuple[str, ...], str, dict[str, Any]],
    parts: dict[str, list[Any]],
    locator: Locator | None,
) -> list[dict]:
    """The rows of one table that the statement `name` finds (a `WHERE` of `parts`' columns
    joined by `OR`, in id order). Where `locator` holds one of those columns (no index starts
    with it: the `OR` would read the whole table), the `OR` is split: each column is looked up
    apart (an index, or the row ids the map holds), the rows merged by id."""
    table, columns, name, params = locate
    held = {}
    for column, values in parts.items() if locator is not None else ():
        ids = locator.rowids_of(table, column, list(dict.fromkeys(values)))
        if ids is not None:
            held[column] = ids
    many = any(len(ids) * SCAN_SHARE > locator.mapped(table, c) for c, ids in held.items())
    if not held or many:  # no map, or rows enough that one read of the table costs less
        return _fetch(conn, name, rows.schema, table, columns, params)
    found: dict[Any, dict] = {}
    for column, values in parts.items():
        wanted = lsql.json_list(values)
        if wanted == "[]":
            continue
        ids = held.get(column)
        if ids is None:
            part = _fetch(
                conn,
                "trace_rows_with",
                rows.schema,
                table,
                columns,
                {"values": wanted},
                column=column,
            )
        else:
            located = {"values": wanted, "ids": lsql.json_list(ids), "after": locator.after[table]}
            part = _fetch(
                conn, "trace_rows_located", rows.schema, table, columns, located, column=column
            )
        for row in part:
            found.setdefault(row["id"], row)
    return [found[key] for key in sorted(found)]


def _load_calls(conn, rows: TraceRows, locator: Locator | None = None) -> None:
    schema, params = rows.schema, {"trace_id": rows.trace_id}
    if schema.has("model_calls", "trace_id"):
        rows.model_calls = _fetch(
            conn, "trace_model_calls", schema, "model_calls", MODEL_CALL_COLUMNS, params
        )
    elif "model_calls" in schema.tables:
        rows.notes.append("model_calls has no trace_id column in this file: no model calls.")
    params = {**params, "model_call_ids": lsql.json_list(r["id"] for r in rows.model_calls)}
    children = (
        ("tool_calls", TOOL_CALL_COLUMNS),
        ("tool_responses", TOOL_RESPONSE_COLUMNS),
        ("model_items", MODEL_ITEM_COLUMNS),
    )
    for table, columns in children:
        if not schema.has(table, "model_call_id"):
            continue
        by_trace = schema.has(table, "trace_id")
        name = "trace_children" if by_trace else "trace_children_by_call"
        calls = [r["id"] for r in rows.model_calls]
        parts = {"trace_id": [rows.trace_id], "model_call_id": calls} if by_trace else {}
        parts = parts or {"model_call_id": calls}
        found = _lookup(conn, rows, (table, columns, name, params), parts, locator)
        setattr(rows, table, found)
    if "model_items" not in schema.tables and rows.model_calls:
        rows.notes.append("This file predates model_items (2026-06-14): no item nodes.")


def _load_other(conn, rows: TraceRows, locator: Locator | None = None) -> None:
    schema = rows.schema
    for table, columns in TRACE_TABLES.items():
        if schema.has(table, "trace_id"):
            locate = (table, columns, "trace_rows", {"trace_id": rows.trace_id})
            found = _lookup(conn, rows, locate, {"trace_id": [rows.trace_id]}, locator)
            if found:
                rows.other[table] = found
        elif table == "mcp_calls" and table in schema.tables:
            rows.notes.append(
                "mcp_calls has no trace_id in this file; its MCP rows are on the session page."
            )


def trace_event_ids(rows: TraceRows) -> list[str]:
    """Event ids of the trace's own rows that can join security rows and blobs."""
    found = []
    for table_rows in rows.primary_rows().values():
        found += [r.get("event_id") for r in table_rows if usable_event_id(r.get("event_id"))]
    return list(dict.fromkeys(found))


def _load_joined(conn, rows: TraceRows, locator: Locator | None = None) -> None:
    schema = rows.schema
    if not any(schema.has(t, "event_id") for t in ("model_calls", "net_events", "tool_calls")):
        rows.notes.append("This file predates event ids (2026-06-06): no security or body joins.")
    event_ids = trace_event_ids(rows)
    for table, columns in SECURITY_TABLES.items():
        found = _joined(conn, rows, (table, columns), event_ids, locator)
        if found:
            rows.security[table] = found
    rows.bodies = _joined(conn, rows, ("event_body_blobs", BODY_COLUMNS), event_ids, locator)


def _joined(
    conn, rows: TraceRows, read: tuple[str, tuple[str, ...]], event_ids: list[str], locator
) -> list[dict]:
    """The rows of a security table or of the blobs joined to the trace's `event_ids`, or
    tagged with its trace id."""
    (table, columns), schema = read, rows.schema
    if not schema.has(table, "event_id"):
        return []
    params = {"trace_id": rows.trace_id, "event_ids": lsql.json_list(event_ids)}
    parts: dict[str, list[Any]] = {"event_id": event_ids}
    if schema.has(table, "trace_id"):
        parts["trace_id"] = [rows.trace_id]
    name = "trace_joined" if schema.has(table, "trace_id") else "trace_joined_by_event"
    return _lookup(conn, rows, (table, columns, name, params), parts, locator)


def _load_link_targets(conn, rows: TraceRows, locator: Locator | None = None) -> None:
    """Look outside the trace for the targets of links the trace's rows cannot resolve."""
    _load_outside_model_calls(conn, rows)
    _load_present_event_ids(conn, rows, locator)
    _load_present_responses(conn, rows)
    _load_present_execs(conn, rows)
    _load_event_id_uses(conn, rows, locator)
    _load_pairs_elsewhere(conn, rows, locator)


# Tool calls a model emitted, which a tool_responses row answers (spec §6.2 check 6).
ANSWERED_ORIGINS = ("native", "local", "mcp_proxy")


def _load_pairs_elsewhere(conn, rows: TraceRows, locator: Locator | None = None) -> None:
    """The calls this trace's loose results answer, and the results that answer its loose
    calls, in other traces; read only when the trace has a result or call with no partner."""
    calls_here = {c.get("call_id") for c in rows.tool_calls}
    answers_here = {r.get("call_id") for r in rows.tool_responses}
    loose_results = [r["id"] for r in rows.tool_responses if r.get("call_id") not in calls_here]
    loose_calls = [  # an MCP call (origin mcp) never gets a result row: not loose
        c["id"]
        for c in rows.tool_calls
        if c.get("origin", "native") in ANSWERED_ORIGINS and c.get("call_id") not in answers_here
    ]
    if locator is not None:  # the whole file's pairs, read with the map (a query over it)
        results, calls = set(loose_results), set(loose_calls)
        pairs = [
            pair
            for found in locator.elsewhere.values()
            for pair in found
            if pair["id"] in results or pair["call_row"] in calls
        ]
    else:
        pairs = pairs_elsewhere(conn, rows.schema, loose_results, loose_calls)
    for pair in pairs:
        if pair["id"] in loose_results:
            rows.paired_elsewhere[pair["id"]] = pair
        if pair["call_row"] in loose_calls:
            rows.answered_elsewhere.setdefault(pair["call_row"], []).append(pair)


# Writer paths that split ONE user turn into several traces (spec §4.4): a retry or a resume
# carries on the same turn; a history re-sent by the Responses API is a new user turn.
SPLIT_PATHS = {
    "retry": "after a retry",
    "resume": "after a resume",
    "trace_completed": "after its trace was completed",
    "id_scheme": "under Gemini CLI's ids",
}


def pairs_elsewhere(
    conn, schema: LedgerSchema, results: list | None, calls: list | None
) -> list[dict]:
    """The rule book's own pairing across traces (tool_results_across_traces, spec §4.4) of
    these tool_responses ids and tool_calls ids (None and None: every pair of the file): one
    row per result and the call it answers."""
    spec = spec_for("tool_results_across_traces", schema)
    if spec is None or results == [] and calls == []:
        return []
    if results is None and calls is None:
        return lsql.fetch(conn, spec.render(schema) or "")
    params = {"results": lsql.json_list(results or []), "calls": lsql.json_list(calls or [])}
    sql = render_sql(  # the rule book's query, kept to the rows asked about
        "SELECT * FROM ({pairs}) AS pairs"
        " WHERE pairs.id IN (SELECT value FROM json_each(:results))"
        " OR pairs.call_row IN (SELECT value FROM json_each(:calls))",
        fragments={"pairs": spec.render(schema) or ""},
    )
    return lsql.fetch(conn, sql, params)


def _load_outside_model_calls(conn, rows: TraceRows) -> None:
    inside = {r["id"] for r in rows.model_calls}
    wanted = {
        r.get("model_call_id")
        for r in rows.tool_calls + rows.tool_responses + rows.model_items
        if r.get("model_call_id") is not None and r.get("model_call_id") not in inside
    }
    if not wanted or "model_calls" not in rows.schema.tables:
        return
    found = _fetch(
        conn,
        "rows_by_id",
        rows.schema,
        "model_calls",
        MODEL_CALL_COLUMNS,
        {"ids": lsql.json_list(sorted(wanted, key=str))},
    )
    by_id = {r["id"]: r for r in found}
    rows.outside_model_calls = {mc_id: by_id.get(mc_id) for mc_id in wanted}


def _load_present_event_ids(conn, rows: TraceRows, locator: Locator | None = None) -> None:
    """For security rows and blobs: which referenced event ids exist in which table."""
    wanted: dict[str, set[str]] = {}
    for rule in rows.security.get("security_rule_events", []):
        table = EVENT_TYPE_TABLES.get(rule.get("event_type") or "")
        if table and isinstance(rule.get("event_id"), str):
            wanted.setdefault(table, set()).add(rule["event_id"])
    for body in rows.bodies:
        table = body.get("source_table")
        if table in lsql.LEDGER_TABLES and isinstance(body.get("event_id"), str):
            wanted.setdefault(table, set()).add(body["event_id"])
    own = rows.primary_rows()
    for table, event_ids in wanted.items():
        present = {r.get("event_id") for r in own.get(table, [])} & event_ids
        missing = event_ids - present
        known = None
        if locator is not None and missing:
            known = locator.uses_of(table, sorted(missing))
        if known is not None:
            present |= set(known)
        elif missing and rows.schema.has(table, "event_id"):
            found = lsql.run(
                conn,
                "present_event_ids",
                {"event_ids": lsql.json_list(sorted(missing))},
                table=table,
            )
            present |= {r["event_id"] for r in found}
        rows.present_event_ids[table] = present


def _load_present_responses(conn, rows: TraceRows) -> None:
    wanted = {
        item.get("call_id")
        for item in rows.model_items
        if item.get("kind") == "tool_response" and item.get("call_id")
    }
    own = {r.get("call_id") for r in rows.tool_responses}
    rows.present_response_call_ids = own & wanted
    missing = wanted - own
    if missing and rows.schema.has("tool_responses", "call_id"):
        found = lsql.run(
            conn,
            "present_call_ids",
            {"call_ids": lsql.json_list(sorted(missing))},
            table="tool_responses",
        )
        rows.present_response_call_ids |= {r["call_id"] for r in found}


def _load_present_execs(conn, rows: TraceRows) -> None:
    wanted = {
        a.get("exec_event_id")
        for a in rows.other.get("audit_events", [])
        if isinstance(a.get("exec_event_id"), int)
    }
    if not wanted or "exec_events" not in rows.schema.tables:
        return
    found = lsql.run(
        conn,
        "rows_by_id",
        {"ids": lsql.json_list(sorted(wanted))},
        schema=rows.schema,
        table="exec_events",
        columns=("id",),
    )
    rows.present_exec_ids = {r["id"] for r in found}


def _load_event_id_uses(conn, rows: TraceRows, locator: Locator | None = None) -> None:
    """Spec §6.2 check 1 across the whole file: an event id names exactly one row."""
    wanted = trace_event_ids(rows)
    event_ids = lsql.json_list(wanted)
    if event_ids == "[]":
        return
    for table in PRIMARY_TABLES:
        if not rows.schema.has(table, "event_id"):
            continue
        known = locator.uses_of(table, wanted) if locator is not None else None
        if known is not None:
            for event_id, uses in known.items():
                rows.event_id_uses[event_id] = rows.event_id_uses.get(event_id, 0) + uses
            continue
        for found in lsql.run(conn, "event_id_uses", {"event_ids": event_ids}, table=table):
            uses = rows.event_id_uses.get(found["event_id"], 0)
            rows.event_id_uses[found["event_id"]] = uses + found["uses"]


def _check_body_hashes(conn, rows: TraceRows) -> None:
    """blake3 of stored bytes vs body_hash, for as many blobs as the budget allows."""
    budget, chosen = HASH_BUDGET_BYTES, []
    for body in rows.bodies:
        if body.get("truncated"):  # the hash covers bytes the ledger does not hold
            rows.body_hash[body["id"]] = UNVERIFIABLE
    pending = [body for body in rows.bodies if body["id"] not in rows.body_hash]
    for body in sorted(pending, key=lambda b: b.get("body_length") or 0):
        size = body.get("body_length") or 0
        if size > budget:
            break
        budget -= size
        chosen.append(body["id"])
    if not chosen:
        return
    cursor = conn.execute(lsql.query_text("body_bytes"), {"ids": lsql.json_list(chosen)})
    truncated = {body["id"]: body.get("truncated") for body in rows.bodies}
    for blob_id, data, expected in cursor:
        rows.body_hash[blob_id] = hash_verdict(data, expected, truncated.get(blob_id))


def row_start_ms(row: dict[str, Any]) -> float | None:
    """A row's start time in epoch ms; security tables store integer milliseconds."""
    if START_KEY in row:
        return row[START_KEY]
    if "timestamp_unix_ms" in row:
        return as_float(row.get("timestamp_unix_ms"))
    return parse_ms(row.get("timestamp") if "timestamp" in row else row.get("created_at"))


def row_summary(rows: TraceRows) -> dict[str, Any]:
    """How many rows of each table the trace has."""
    counts = {table.name: len(getattr(rows, table.name)) for table in joined_by("spine")}
    counts["event_body_blobs"] = len(rows.bodies)
    counts.update({table: len(found) for table, found in rows.other.items()})
    counts.update({table: len(found) for table, found in rows.security.items()})
    return {table: n for table, n in counts.items() if n}
