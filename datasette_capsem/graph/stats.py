"""Per-session summaries like Capsem's Stats tabs (spec §8.2): HTTP, DNS, processes,
credentials, security and MCP, each figure with the Datasette filters that list its rows.

Schema-tolerant: a section whose table the file lacks is absent, a figure whose column it
lacks is left out, never an error. Every figure is `{label, value, table, filters}`, where
`filters` are Datasette table-page filters (`column=value`, `column__not=value`,
`column__isnull=1`) on columns that carry no secret, so the page links each number to
exactly the rows it counts. SQL is built here from fixed identifiers only; values are bound.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from datasette_capsem.ledger.dialect import quote_identifier as q
from datasette_capsem.ledger.schema import LedgerSchema

GROUP_LIMIT = 25
LATEST_LIMIT = 10
MCP_ORIGINS = ("mcp", "mcp_proxy")


def _figure(label: str, value: Any, table: str, **filters: Any) -> dict[str, Any]:
    return {"label": label, "value": value, "table": table, "filters": filters}


def _count(conn, table: str, where: str = "1", params: tuple = ()) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM {q(table)} WHERE {where}", params).fetchone()[0]


def _group(
    conn: sqlite3.Connection,
    table: str,
    column: str,
    title: str,
    *,
    where: str = "1",
    params: tuple = (),
    base: dict[str, Any] | None = None,
    null_label: str = "(none)",
) -> dict[str, Any]:
    """Rows of `table` counted by `column`, most first, each with its filter."""
    sql = (
        f"SELECT {q(column)} AS value, COUNT(*) AS n FROM {q(table)} WHERE {where} "
        f"GROUP BY {q(column)} ORDER BY n DESC, value LIMIT {GROUP_LIMIT}"
    )
    rows = []
    for value, count in conn.execute(sql, params):
        filters = dict(base or {})
        if value is None:
            filters[f"{column}__isnull"] = 1
        else:
            filters[column] = value
        label = null_label if value is None else str(value)
        rows.append({"label": label, "value": count, "table": table, "filters": filters})
    return {"title": title, "column": column, "rows": rows}


def http(conn, schema: LedgerSchema) -> dict[str, Any] | None:
    table = "net_events"
    if table not in schema.tables:
        return None
    has = schema.tables[table]
    figures = [_figure("Requests", _count(conn, table), table)]
    if "decision" in has:
        for decision in ("allowed", "denied", "error"):
            count = _count(conn, table, "decision = ?", (decision,))
            figures.append(_figure(decision.capitalize(), count, table, decision=decision))
    for column, label in (("bytes_received", "Bytes in"), ("bytes_sent", "Bytes out")):
        if column in has:
            total = conn.execute(f"SELECT COALESCE(SUM({q(column)}), 0) FROM {q(table)}")
            figures.append(_figure(label, total.fetchone()[0], table, **{f"{column}__gt": 0}))
    groups = []
    if "method" in has:
        groups.append(_group(conn, table, "method", "Methods", null_label="CONNECT"))
    if "domain" in has:
        groups.append(_group(conn, table, "domain", "Domains"))
    return {"name": "HTTP", "table": table, "figures": figures, "groups": groups}


def dns(conn, schema: LedgerSchema) -> dict[str, Any] | None:
    table = "dns_events"
    if table not in schema.tables:
        return None
    has = schema.tables[table]
    figures = [_figure("Queries", _count(conn, table), table)]
    if "decision" in has:
        for decision in ("denied", "redirected", "error"):
            count = _count(conn, table, "decision = ?", (decision,))
            figures.append(_figure(decision.capitalize(), count, table, decision=decision))
    if "upstream_resolver_ms" in has:
        avg = conn.execute(
            f"SELECT AVG(upstream_resolver_ms) FROM {q(table)} WHERE upstream_resolver_ms IS NOT NULL"
        ).fetchone()[0]
        figures.append(
            _figure(
                "Avg upstream (ms)",
                None if avg is None else round(avg, 1),
                table,
                upstream_resolver_ms__notnull=1,
            )
        )
    groups = [
        _group(conn, table, column, title)
        for column, title in (("qtype", "Types"), ("rcode", "Rcodes"), ("decision", "Decisions"))
        if column in has
    ]
    return {"name": "DNS", "table": table, "figures": figures, "groups": groups}


def processes(conn, schema: LedgerSchema) -> dict[str, Any] | None:
    figures, groups = [], []
    if "exec_events" in schema.tables:
        figures.append(_figure("Execs", _count(conn, "exec_events"), "exec_events"))
        if "exit_code" in schema.tables["exec_events"]:
            failed = _count(conn, "exec_events", "exit_code IS NOT NULL AND exit_code != 0")
            figures.append(_figure("Failures (exit ≠ 0)", failed, "exec_events", exit_code__not=0))
    if "audit_events" in schema.tables:
        has = schema.tables["audit_events"]
        figures.append(_figure("Observed processes", _count(conn, "audit_events"), "audit_events"))
        if "exe" in has:
            unique = conn.execute("SELECT COUNT(DISTINCT exe) FROM audit_events").fetchone()[0]
            figures.append(_figure("Unique binaries", unique, "audit_events", exe__notnull=1))
            groups.append(_group(conn, "audit_events", "exe", "Binaries"))
        if "parent_exe" in has:
            groups.append(_group(conn, "audit_events", "parent_exe", "Parent executables"))
    if not figures:
        return None
    return {"name": "Processes", "table": "exec_events", "figures": figures, "groups": groups}


def credentials(conn, schema: LedgerSchema) -> dict[str, Any] | None:
    table = "substitution_events"
    if table not in schema.tables:
        return None
    has = schema.tables[table]
    figures = [_figure("Broker events", _count(conn, table), table)]
    if "outcome" in has:
        for outcome in ("captured", "brokered", "injected", "error"):
            count = _count(conn, table, "outcome = ?", (outcome,))
            figures.append(_figure(outcome.capitalize(), count, table, outcome=outcome))
    groups = [
        _group(conn, table, column, title)
        for column, title in (
            ("outcome", "By outcome"),
            ("source", "By source"),
            ("provider", "By provider"),
            ("event_type", "By origin"),
        )
        if column in has
    ]
    return {"name": "Credentials", "table": table, "figures": figures, "groups": groups}


def security(conn, schema: LedgerSchema) -> dict[str, Any] | None:
    table = "security_rule_events"
    if table not in schema.tables:
        return None
    has = schema.tables[table]
    figures = [_figure("Rule matches", _count(conn, table), table)]
    if "detection_level" in has:
        count = _count(conn, table, "COALESCE(detection_level, 'none') != 'none'")
        figures.append(_figure("Detections", count, table, detection_level__not="none"))
    groups = [
        _group(conn, table, column, title)
        for column, title in (
            ("rule_action", "By action"),
            ("detection_level", "By detection level"),
            ("event_type", "By event type"),
            ("rule_id", "By rule"),
        )
        if column in has
    ]
    lists = []
    order = "timestamp_unix_ms DESC, id DESC" if "timestamp_unix_ms" in has else "id DESC"
    if {"detection_level", "rule_id"} <= set(has):
        lists.append(
            _latest(
                conn,
                table,
                "Latest detections",
                ("timestamp_unix_ms", "event_type", "rule_id", "rule_action", "detection_level"),
                has,
                "COALESCE(detection_level, 'none') != 'none'",
                order,
            )
        )
    decisions = "security_decision_events"
    if schema.has(decisions, "effective_decision"):
        dhas = schema.tables[decisions]
        count = _count(conn, decisions, "effective_decision != 'allow'")
        figures.append(
            _figure("Enforcements (not allowed)", count, decisions, effective_decision__not="allow")
        )
        dorder = "timestamp_unix_ms DESC, id DESC" if "timestamp_unix_ms" in dhas else "id DESC"
        lists.append(
            _latest(
                conn,
                decisions,
                "Latest enforcement",
                ("timestamp_unix_ms", "event_type", "stage", "rule_id", "effective_decision"),
                dhas,
                "effective_decision != 'allow'",
                dorder,
            )
        )
    return {
        "name": "Security",
        "table": table,
        "figures": figures,
        "groups": groups,
        "lists": lists,
    }


def _latest(conn, table, title, columns, has, where, order) -> dict[str, Any]:
    shown = [c for c in columns if c in has]
    sql = (
        f"SELECT id, {', '.join(q(c) for c in shown)} FROM {q(table)} WHERE {where} "
        f"ORDER BY {order} LIMIT {LATEST_LIMIT}"
    )
    rows = [dict(zip(("id", *shown), row, strict=True)) for row in conn.execute(sql)]
    return {"title": title, "table": table, "columns": shown, "rows": rows}


def mcp(conn, schema: LedgerSchema) -> dict[str, Any] | None:
    """MCP servers, tools and errors: tool_calls of an MCP origin, or the legacy mcp_calls."""
    if schema.has("tool_calls", "origin", "server_name"):
        table, has = "tool_calls", schema.tables["tool_calls"]
        marks = ", ".join("?" for _ in MCP_ORIGINS)
        where, params = f"origin IN ({marks})", MCP_ORIGINS
        scope: list[dict[str, Any]] = [{"origin": origin} for origin in MCP_ORIGINS]
    elif "mcp_calls" in schema.tables:
        table, has = "mcp_calls", schema.tables["mcp_calls"]
        where, params, scope = "1", (), [{}]
    else:
        return None
    total = _count(conn, table, where, params)
    if total == 0 and table == "tool_calls":
        return None
    figures = []
    for filters in scope:
        suffix = f" ({filters['origin']})" if filters else ""
        where_one, params_one = _where(filters)
        figures.append(
            _figure("Calls" + suffix, _count(conn, table, where_one, params_one), table, **filters)
        )
        # error_message is free text (no filter may probe it): errors are counted by status
        # and decision, which Capsem sets on every failed or refused call.
        if "status" in has:
            count = _count(conn, table, f"({where_one}) AND status = 'error'", params_one)
            figures.append(_figure("Errors" + suffix, count, table, **filters, status="error"))
        if "decision" in has:
            count = _count(conn, table, f"({where_one}) AND decision != 'allowed'", params_one)
            figures.append(
                _figure("Not allowed" + suffix, count, table, **filters, decision__not="allowed")
            )
    groups = []
    for filters in scope:
        where_one, params_one = _where(filters)
        suffix = f" ({filters['origin']})" if filters else ""
        for column, title in (("server_name", "Servers"), ("tool_name", "Tools")):
            if column in has:
                group = _group(
                    conn,
                    table,
                    column,
                    title + suffix,
                    where=where_one,
                    params=params_one,
                    base=filters,
                )
                if group["rows"]:
                    groups.append(group)
    return {"name": "MCP", "table": table, "figures": figures, "groups": groups}


def _where(filters: dict[str, Any]) -> tuple[str, tuple]:
    if not filters:
        return "1", ()
    return " AND ".join(f"{q(c)} = ?" for c in filters), tuple(filters.values())


SECTIONS = (http, dns, processes, credentials, security, mcp)


def session_stats(conn: sqlite3.Connection, schema: LedgerSchema) -> list[dict[str, Any]]:
    """Every section the file can answer, in the order of Capsem's Stats tabs."""
    found = []
    for section in SECTIONS:
        result = section(conn, schema)
        if result is not None:
            result.setdefault("lists", [])
            found.append(result)
    return found
