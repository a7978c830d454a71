"""The text on the nodes of a trace's drawing: labels and detail lines, short and bounded.

Every fragment goes through `values.text`, so a hostile ledger value can lengthen no label
beyond its budget and break no line; the page draws them with textContent.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from datasette_capsem.graph.values import as_float, as_int, text
from datasette_capsem.ledger.tables import TABLE

_FIELD = re.compile(r"\{([^{}:]+):(\d+)\}")


@lru_cache(maxsize=256)
def _parts(template: str) -> tuple[tuple[str, tuple[str, ...], int], ...]:
    """(literal text before, alternatives, width) per `{a|b:N}` field, and the tail."""
    parts, at = [], 0
    for match in _FIELD.finditer(template):
        parts.append(
            (template[at : match.start()], tuple(match.group(1).split("|")), int(match.group(2)))
        )
        at = match.end()
    parts.append((template[at:], (), 0))
    return tuple(parts)


def fill(template: str, row: dict[str, Any]) -> str:
    """A label template of the registry (ledger/tables.py) filled from a row: `{a|b:N}` is
    `text(row[a] or row[b], N)`, `'x'` a literal; the template is read once, the values never."""
    out = []
    for literal, alternatives, width in _parts(template):
        out.append(literal)
        if not alternatives:
            continue
        value = None
        for index, name in enumerate(alternatives):
            found = name[1:-1] if name.startswith("'") else row.get(name)
            value = found if index == 0 else (value or found)
        out.append(text(value, width))
    return "".join(out)


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
    spec = TABLE.get(source) if isinstance(source, str) else None
    owner = (spec.body_owner if spec else None) or text(source, 20)
    size = fmt_bytes(row.get("stored_bytes"))
    return f"{owner} {text(row.get('direction'), 10)} body {size}"


def row_label(table: str, row: dict[str, Any]) -> tuple[str, str]:
    """Label and detail line of a row joined to the trace by trace id or event id."""
    spec = TABLE.get(table)
    if spec is None or not spec.label:
        return table, ""
    return fill(spec.label, row), fill(spec.detail, row)
