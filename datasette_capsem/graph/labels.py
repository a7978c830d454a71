"""The text on the nodes of a trace's drawing: labels and detail lines, short and bounded.

Every fragment goes through `values.text`, so a hostile ledger value can lengthen no label
beyond its budget and break no line; the page draws them with textContent.
"""

from __future__ import annotations

from typing import Any

from datasette_capsem.graph.values import as_float, as_int, text

# Whose body a blob is, by its source table, as the picture and the tree label it.
BODY_OWNERS = {"model_calls": "model call", "net_events": "HTTP", "tool_calls": "tool call"}


def short(value: Any, size: int = 8) -> str:
    """An id cut to `size` characters (kept whole when cutting would save one)."""
    shown = text(value, 40)
    return shown[:size] if len(shown) > size + 1 else shown


def fmt_ms(value: Any) -> str:
    ms = as_float(value)
    if ms is None:
        return ""
    return f"{ms / 1000:.1f}s" if ms >= 1000 else f"{ms:.0f}ms"


def fmt_bytes(value: Any) -> str:
    size = as_int(value)
    if size is None:
        return "?"
    for unit in ("B", "KB", "MB"):
        if size < 1024 or unit == "MB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def missing_event_row(node_type: str, event_id: Any) -> str:
    """The label of a placeholder for the row an event id names and no row carries."""
    return f"{node_type.replace('_', ' ')} for event {short(event_id, 12)} — missing"


def body_label(row: dict[str, Any]) -> str:
    source = row.get("source_table")
    owner = BODY_OWNERS.get(source) or text(source, 20)
    size = fmt_bytes(row.get("stored_bytes"))
    return f"{owner} {text(row.get('direction'), 10)} body {size}"


def other_label(table: str, row: dict[str, Any]) -> tuple[str, str]:
    """Label and detail line of a row joined to the trace by trace_id only."""
    if table == "net_events":
        label = f"{text(row.get('method') or 'CONNECT', 8)} {text(row.get('domain'), 28)}"
        return label, f"{text(row.get('status_code'), 4)} {text(row.get('decision'), 10)}"
    if table == "dns_events":
        return f"dns {text(row.get('qname'), 30)}", text(row.get("decision"), 12)
    if table == "fs_events":
        return f"{text(row.get('action'), 10)} {text(row.get('path'), 28)}", ""
    if table == "exec_events":
        return f"exec {text(row.get('command'), 30)}", f"exit {text(row.get('exit_code'), 6)}"
    if table == "audit_events":
        return f"audit {text(row.get('exe'), 30)}", text(row.get("argv"), 40)
    if table == "substitution_events":
        return f"credential {text(row.get('outcome'), 12)}", text(row.get("provider"), 20)
    if table == "mcp_calls":
        return f"MCP {text(row.get('tool_name') or row.get('method'), 28)}", text(
            row.get("server_name"), 24
        )
    if table == "snapshot_events":
        return f"snapshot {text(row.get('name') or row.get('slot'), 24)}", text(
            row.get("origin"), 20
        )
    return table, ""
