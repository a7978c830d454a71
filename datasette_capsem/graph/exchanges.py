"""Model exchanges inside a trace, and the session's ambient trace (spec §4.4).

A UUID trace is one agentic loop: one user turn. The 16-hex trace is the VM's ambient
`CAPSEM_TRACE_ID`: every model call that carried no known tool result and emitted no tool call
(titles, quota probes, plain Q&A) takes it, and so do the session's ambient net, DNS, MCP, exec
and fs rows. It is not a turn: each of its model calls is an exchange of its own, and the rest
of its rows form the ambient lane.

The HTTP row of a model exchange shares the call's trace but not its event id: it is matched by
method and path, nearest in time (`correlate_net`).
"""

from __future__ import annotations

import bisect
import copy
import re
from collections import defaultdict
from typing import Any

from datasette_capsem.graph.trace_rows import TraceRows, row_start_ms, trace_event_ids

AMBIENT_TRACE_RE = re.compile(r"^[0-9a-f]{16}$")
# SQL twin of is_ambient, for queries that group by turn (keep the two in step).
AMBIENT_SQL = "(length({column}) = 16 AND {column} NOT GLOB '*[^0-9a-f]*')"
CORRELATION_WINDOW_MS = 120_000


def is_ambient(trace_id: Any) -> bool:
    """Is this the VM's ambient trace id (16 lowercase hex) rather than a turn's UUID?"""
    return isinstance(trace_id, str) and bool(AMBIENT_TRACE_RE.match(trace_id))


def correlate_net(rows: TraceRows) -> dict[int, int]:
    """net row id -> model call id: same method and path, nearest time (spec §4.4)."""
    by_route: dict[tuple, list[tuple[float, int]]] = defaultdict(list)
    for net in rows.other.get("net_events", []):
        start = row_start_ms(net)
        if start is not None:
            by_route[((net.get("method") or "POST"), net.get("path"))].append((start, net["id"]))
    for candidates in by_route.values():
        candidates.sort()
    taken: dict[int, int] = {}
    for call in rows.model_calls:
        start = row_start_ms(call)
        candidates = by_route.get(((call.get("method") or "POST"), call.get("path")))
        if start is None or not candidates:
            continue
        best = _nearest_free(candidates, start, taken)
        if best is not None:
            taken[best] = call["id"]
    return taken


def _nearest_free(
    candidates: list[tuple[float, int]], start: float, taken: dict[int, int]
) -> int | None:
    """The untaken candidate closest in time to `start`, within the window."""
    position = bisect.bisect_left(candidates, (start, -1))
    best: tuple[float, int] | None = None
    for step in (-1, 1):
        index = position if step == 1 else position - 1
        while 0 <= index < len(candidates):
            moment, row_id = candidates[index]
            gap = abs(moment - start)
            if gap > CORRELATION_WINDOW_MS:
                break
            if row_id not in taken:
                if best is None or gap < best[0]:
                    best = (gap, row_id)
                break
            index += step
    return best[1] if best else None


def scope_to_exchange(rows: TraceRows, model_call_id: int) -> TraceRows:
    """The rows of one model exchange of a trace, in place: the call, what it owns (items,
    tool calls, responses), its HTTP row, and the security rows and bodies of those rows."""
    correlated = correlate_net(rows)
    rows.model_calls = [r for r in rows.model_calls if r["id"] == model_call_id]
    for table in ("tool_calls", "tool_responses", "model_items"):
        kept = [r for r in getattr(rows, table) if r.get("model_call_id") == model_call_id]
        setattr(rows, table, kept)
    net = [r for r in rows.other.get("net_events", []) if correlated.get(r["id"]) == model_call_id]
    rows.other = {"net_events": net} if net else {}
    events = set(trace_event_ids(rows))
    rows.security = {
        table: [r for r in found if r.get("event_id") in events]
        for table, found in rows.security.items()
    }
    rows.security = {table: found for table, found in rows.security.items() if found}
    rows.bodies = [r for r in rows.bodies if r.get("event_id") in events]
    rows.exchange = model_call_id
    return rows


def split_exchanges(rows: TraceRows) -> list[TraceRows]:
    """One `TraceRows` per model call of a trace, each scoped to its exchange."""
    return [scope_to_exchange(copy.copy(rows), call["id"]) for call in rows.model_calls]


def ambient_rest(rows: TraceRows) -> TraceRows:
    """The rows of an ambient trace that no exchange owns: the session-wide lane."""
    owned = {id(row) for part in split_exchanges(rows) for row in _all_rows(part)}
    rest = copy.copy(rows)
    rest.model_calls, rest.tool_calls, rest.tool_responses, rest.model_items = [], [], [], []
    rest.other = {
        table: kept
        for table, found in rows.other.items()
        if (kept := [r for r in found if id(r) not in owned])
    }
    rest.security = {
        table: kept
        for table, found in rows.security.items()
        if (kept := [r for r in found if id(r) not in owned])
    }
    rest.bodies = [r for r in rows.bodies if id(r) not in owned]
    return rest


def _all_rows(rows: TraceRows) -> list[dict]:
    found = rows.model_calls + rows.tool_calls + rows.tool_responses + rows.model_items
    for table_rows in list(rows.other.values()) + list(rows.security.values()):
        found += table_rows
    return found + rows.bodies
