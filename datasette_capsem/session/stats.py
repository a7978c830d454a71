"""Per-session summaries like Capsem's Stats tabs (spec §8.2): HTTP, DNS, processes,
credentials, security and MCP, each figure with the Datasette filters that list its rows.

Schema-tolerant: a section whose table the file lacks is absent, a figure whose column it
lacks is left out, never an error. Every figure is `{label, value, table, filters}`, where
`filters` are Datasette table-page filters (`column=value`, `column__not=value`,
`column__isnull=1`) on columns that carry no secret, so the page links each number to
exactly the rows it counts. SQL is rendered (`ledger/dialect.py`) from fixed identifiers only;
values are bound.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from datasette_capsem.ledger.dialect import quote_identifier, render_sql
from datasette_capsem.ledger.schema import LedgerSchema

GROUP_LIMIT = 25
LATEST_LIMIT = 10
MCP_ORIGINS = ("mcp", "mcp_proxy")


def _figure(label: str, value: Any, table: str, **filters: Any) -> dict[str, Any]:
    return {"label": label, "value": value, "table": table, "filters": filters}


def _count(conn, table: str, where: str = "1", params: tuple = ()) -> int:
    sql = render_sql(
        "SELECT COUNT(*) FROM {table} WHERE {where}", table=table, fragments={"where": where}
    )
    return conn.execute(sql, params).fetchone()[0]


def _total(conn, schema: LedgerSchema, table: str, label: str):
    """(the table's columns, [its row count as a figure]), or None when the file lacks it."""
    if table not in schema.tables:
        return None
    return schema.tables[table], [_figure(label, _count(conn, table), table)]


def _by_value(conn, table: str, column: str, values: tuple[str, ...]) -> list[dict[str, Any]]:
    """One figure per value of `column` (its rows counted, its filter `column=value`)."""
    figures = []
    for value in values:
        count = _count(conn, table, render_sql("{column} = ?", column=column), (value,))
        figures.append(_figure(value.capitalize(), count, table, **{column: value}))
    return figures


def _groups(conn, table: str, has, columns: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    """A `_group` for each (column, title) whose column the table has."""
    return [_group(conn, table, column, title) for column, title in columns if column in has]


def _newest_first(has) -> str:
    return "timestamp_unix_ms DESC, id DESC" if "timestamp_unix_ms" in has else "id DESC"


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
    sql = render_sql(
        "SELECT {column} AS value, COUNT(*) AS n FROM {table} WHERE {where} "
        "GROUP BY {column} ORDER BY n DESC, value LIMIT {limit}",
        table=table,
        column=column,
        fragments={"where": where, "limit": str(GROUP_LIMIT)},
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
    if (start := _total(conn, schema, table, "Requests")) is None:
        return None
    has, figures = start
    if "decision" in has:
        figures += _by_value(conn, table, "decision", ("allowed", "denied", "error"))
    for column, label in (("bytes_received", "Bytes in"), ("bytes_sent", "Bytes out")):
        if column in has:
            sql = render_sql(
                "SELECT COALESCE(SUM({column}), 0) FROM {table}", table=table, column=column
            )
            total = conn.execute(sql)
            figures.append(_figure(label, total.fetchone()[0], table, **{f"{column}__gt": 0}))
    groups = []
    if "method" in has:
        groups.append(_group(conn, table, "method", "Methods", null_label="CONNECT"))
    if "domain" in has:
        groups.append(_group(conn, table, "domain", "Domains"))
    return {"name": "HTTP", "table": table, "figures": figures, "groups": groups}


def dns(conn, schema: LedgerSchema) -> dict[str, Any] | None:
    table = "dns_events"
    if (start := _total(conn, schema, table, "Queries")) is None:
        return None
    has, figures = start
    if "decision" in has:
        figures += _by_value(conn, table, "decision", ("denied", "redirected", "error"))
    if "upstream_resolver_ms" in has:
        sql = "SELECT AVG(upstream_resolver_ms) FROM {table} WHERE upstream_resolver_ms IS NOT NULL"
        avg = conn.execute(render_sql(sql, table=table)).fetchone()[0]
        figures.append(
            _figure(
                "Avg upstream (ms)",
                None if avg is None else round(avg, 1),
                table,
                upstream_resolver_ms__notnull=1,
            )
        )
    groups = _groups(
        conn, table, has, (("qtype", "Types"), ("rcode", "Rcodes"), ("decision", "Decisions"))
    )
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
    if (start := _total(conn, schema, table, "Broker events")) is None:
        return None
    has, figures = start
    if "outcome" in has:
        figures += _by_value(conn, table, "outcome", ("captured", "brokered", "injected", "error"))
    by = (
        ("outcome", "By outcome"),
        ("source", "By source"),
        ("provider", "By provider"),
        ("event_type", "By origin"),
    )
    groups = _groups(conn, table, has, by)
    return {"name": "Credentials", "table": table, "figures": figures, "groups": groups}


def security(conn, schema: LedgerSchema) -> dict[str, Any] | None:
    table = "security_rule_events"
    if (start := _total(conn, schema, table, "Rule matches")) is None:
        return None
    has, figures = start
    if "detection_level" in has:
        count = _count(conn, table, "COALESCE(detection_level, 'none') != 'none'")
        figures.append(_figure("Detections", count, table, detection_level__not="none"))
    by = (
        ("rule_action", "By action"),
        ("detection_level", "By detection level"),
        ("event_type", "By event type"),
        ("rule_id", "By rule"),
    )
    groups = _groups(conn, table, has, by)
    lists = []
    if {"detection_level", "rule_id"} <= set(has):
        columns = ("timestamp_unix_ms", "event_type", "rule_id", "rule_action", "detection_level")
        where = "COALESCE(detection_level, 'none') != 'none'"
        lists.append(_latest(conn, table, "Latest detections", columns, has, where))
    decisions = "security_decision_events"
    if schema.has(decisions, "effective_decision"):
        count = _count(conn, decisions, "effective_decision != 'allow'")
        figures.append(
            _figure("Enforcements (not allowed)", count, decisions, effective_decision__not="allow")
        )
        columns = ("timestamp_unix_ms", "event_type", "stage", "rule_id", "effective_decision")
        where = "effective_decision != 'allow'"
        lists.append(
            _latest(conn, decisions, "Latest enforcement", columns, schema.tables[decisions], where)
        )
    return {
        "name": "Security",
        "table": table,
        "figures": figures,
        "groups": groups,
        "lists": lists,
    }


def _latest(conn, table, title, columns, has, where) -> dict[str, Any]:
    """The newest rows matching `where`, with those of `columns` the table has."""
    shown = [c for c in columns if c in has]
    sql = render_sql(
        "SELECT id, {columns} FROM {table} WHERE {where} ORDER BY {order} LIMIT {limit}",
        table=table,
        fragments={
            "columns": ", ".join(quote_identifier(c) for c in shown),
            "where": where,
            "order": _newest_first(has),
            "limit": str(LATEST_LIMIT),
        },
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
    figures, groups = [], []
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
    return " AND ".join(render_sql("{column} = ?", column=c) for c in filters), tuple(
        filters.values()
    )


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
