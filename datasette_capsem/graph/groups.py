"""Where each row of a trace stands in the drawing: its group and its time offset.

Groups 1..N are the trace's model calls in time order (or, in a trace with no model call,
its rows one by one); a row belongs to the model call that owns it or, failing that, to the
step it happened in. Group 0 holds the trace and its turns. Offsets are milliseconds from
the trace's first timed row.
"""

from __future__ import annotations

import bisect
from typing import Any

from datasette_capsem.graph.trace_rows import TraceRows, row_start_ms


class Groups:
    """The columns of one trace's drawing, decided once from its rows."""

    def __init__(self, rows: TraceRows):
        self.t0 = _trace_start(rows)
        self.of_call: dict[int, int] = {}  # model call id -> its group
        anchors = rows.model_calls or sorted(
            _anchor_rows(rows), key=lambda r: (row_start_ms(r) or 0.0, r["id"])
        )
        times: list[float] = []
        for index, row in enumerate(anchors, start=1):
            if rows.model_calls:
                self.of_call[row["id"]] = index
            times.append(row_start_ms(row) or (times[-1] if times else 0.0))
        self.anchor_times = times

    def at(self, ms: float | None) -> int:
        """The group of a moment: the last step begun by then (the last one when unknown)."""
        if not self.anchor_times:
            return 0
        if ms is None:
            return len(self.anchor_times)
        return bisect.bisect_right(self.anchor_times, ms)

    def of_row(self, row: dict[str, Any], model_call_id: Any = None) -> int:
        """The group of the model call that owns a row, else of the moment it started."""
        return self.of_call.get(model_call_id) or self.at(row_start_ms(row))

    def offset(self, row: dict[str, Any]) -> float | None:
        start = row_start_ms(row)
        if start is None or self.t0 is None:
            return None
        return round(start - self.t0, 3)


def _trace_start(rows: TraceRows) -> float | None:
    found = rows.model_calls + rows.tool_calls + rows.model_items
    for table_rows in list(rows.other.values()) + list(rows.security.values()):
        found += table_rows
    starts = [s for s in (row_start_ms(r) for r in found) if s is not None]
    return min(starts) if starts else None


def _anchor_rows(rows: TraceRows) -> list[dict]:
    found = list(rows.tool_calls)
    for table_rows in rows.other.values():
        found += table_rows
    return found
