"""The waterfall timeline of one trace: every timed row, its start and its duration.

Capsem's own `/timeline` unions exec, tool, net, fs and model rows (spec §8.2); this adds DNS,
audit, credential and security rows, and keeps each bar's link to its row. Model items and
tool responses are parts of model calls (responses have no timestamp at all), so they appear
in the graph, not here.

**The critical path** (`critical_path`) is the chain of spans that determines when the trace
ends: start from the span that ends last; then, again and again, step back to the span that
ends last among those that had ended by the time the current one started. A span off the
chain could have taken longer without moving the end; shortening a span on it moves the end
(unless the gap before it absorbs the change). Only the spans that do the turn's work are
candidates (`CRITICAL_KINDS`: model calls, tool calls, MCP calls and processes); HTTP, DNS, file,
security and body rows are parts or side effects of those. Overlapping spans are concurrent:
the one that ends last is on the path, the others are not. The tree's spans and the
waterfall's bars carry `critical` from the same function.
"""

from __future__ import annotations

from typing import Any

from datasette_capsem.graph.labels import fill
from datasette_capsem.graph.timeparse import iso_from_ms
from datasette_capsem.graph.trace_rows import TraceRows, row_start_ms
from datasette_capsem.graph.values import as_float, usable_event_id
from datasette_capsem.ledger.tables import TABLES, Bar
from datasette_capsem.urls import SessionUrls

# The tables on the timeline and their bars (kind, duration column, label), from the registry.
BARS: dict[str, Bar] = {table.name: table.bar for table in TABLES if table.bar}
KIND_RANK: dict[str, int] = {bar.kind: bar.rank for bar in BARS.values()}
CRITICAL_KINDS = frozenset(table.bar.kind for table in TABLES if table.critical and table.bar)
CRITICAL_SLACK_MS = 1.0  # timestamps are in ms: an end within 1 ms of a start counts as before it


def critical_path(spans: list[tuple[str, float, float]]) -> list[str]:
    """The ids on the critical path of `(id, start_ms, duration_ms)` spans, in time order.

    Ties on the end go to the span that started first (it covers more of the wait), then to
    the earlier id in `spans` (model calls are listed before the tool calls whose native rows
    copy their timing, spec: `tool_calls.duration_ms` copied from the model call)."""
    ends = sorted(
        (start + max(duration, 0.0), max(duration, 0.0), -index, span_id, start)
        for index, (span_id, start, duration) in enumerate(spans)
    )  # the preferred of equal ends sorts last
    path: list[str] = []
    limit = last_end = float("inf")
    for end, _, _, span_id, start in reversed(ends):
        if end <= limit and end < last_end:
            path.append(span_id)
            limit, last_end = start + CRITICAL_SLACK_MS, end
    return path[::-1]


def _security_rows(rows: TraceRows) -> list[tuple[str, dict[str, Any]]]:
    return [(table, row) for table, found in rows.security.items() for row in found]


def waterfall_rows(rows: TraceRows, links: SessionUrls) -> dict[str, Any]:
    """Bars sorted by start; offsets are from the first row, durations in ms."""
    tables: list[tuple[str, dict[str, Any]]] = [("model_calls", r) for r in rows.model_calls]
    tables += [("tool_calls", r) for r in rows.tool_calls]
    tables += [(table, r) for table, found in rows.other.items() for r in found]
    tables += _security_rows(rows)
    bars, unplaced = [], 0
    for table, row in tables:
        bar = BARS[table]
        kind, duration_column = bar.kind, bar.duration
        start = row_start_ms(row)
        unplaced += start is None
        duration = as_float(row.get(duration_column)) if duration_column else None
        event_id = row.get("event_id")
        row_url = links.row(table, row.get("id"))
        bars.append(
            {
                "kind": kind,
                "table": table,
                "row_id": row.get("id"),
                "label": fill(bar.label, row),
                "start": iso_from_ms(start),
                "start_ms": start,
                "duration_ms": max(duration, 0.0) if duration is not None else 0.0,
                "event_id": event_id,
                "row": row_url,
                "href": links.event(event_id) if usable_event_id(event_id) else row_url,
            }
        )
    return _placed(bars, unplaced)


def _placed(bars: list[dict[str, Any]], unplaced: int) -> dict[str, Any]:
    starts = [b["start_ms"] for b in bars if b["start_ms"] is not None]
    t0 = min(starts) if starts else 0.0
    end = max(
        (b["start_ms"] + b["duration_ms"] for b in bars if b["start_ms"] is not None), default=t0
    )
    span = max(end - t0, 1.0)
    for bar in bars:
        offset = (bar["start_ms"] - t0) if bar["start_ms"] is not None else 0.0
        bar["offset_ms"] = round(offset, 3)
        bar["left_pct"] = round(100.0 * offset / span, 3)
        bar["width_pct"] = round(max(100.0 * bar["duration_ms"] / span, 0.15), 3)
    timed = [
        (str(i), b["start_ms"], b["duration_ms"])
        for i, b in enumerate(bars)
        if b["start_ms"] is not None and b["kind"] in CRITICAL_KINDS
    ]
    on_path = [bars[int(i)] for i in critical_path(timed)]
    for bar in bars:
        bar["critical"] = False
    for bar in on_path:
        bar["critical"] = True
    bars.sort(
        key=lambda b: (
            b["start_ms"] is None,
            b["start_ms"] or 0.0,
            KIND_RANK[b["kind"]],
            b["row_id"] if isinstance(b["row_id"], int) else 0,
        )
    )
    return {
        "start": iso_from_ms(t0) if starts else None,
        "end": iso_from_ms(end) if starts else None,
        "duration_ms": round(end - t0, 3) if starts else 0.0,
        "rows": bars,
        "unplaced": unplaced,
        "critical_path": [f"{b['table']}:{b['row_id']}" for b in on_path],
    }
