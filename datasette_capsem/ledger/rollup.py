"""The one comparison of a main.db `sessions` row with its ledger (spec §3.5, §6.2 #17).

The integrity check (`checks/filechecks.py::RollupCheck`) and the session list
(`index/listing.py`) both call `compare_rollup`; they differ only in where the fresh figures
come from (the check runs `checks/sql/rollup__*.sql` on the open ledger, the list reads the
cross-session index), never in what counts as a disagreement.

What is compared, and what is not:

* Statuses: a row is rolled up when its session stops; `vacuumed` rows (0.x) keep the counters
  of their stop and their ledger's content (VACUUM and gzip change no row), so they are compared
  too. `running` and `terminated` rows are not.
* `total_mcp_calls` is never compared: HEAD never writes it (removed 2026-06-24, old files keep
  the column at 0, spec §3.3), and how older writers counted MCP calls is not documented.
* Legacy `capsem run` rows: from 1.0 until the restored rollup first shipped in 1.3 on
  2026-06-27, `mode='run'` rows were rolled up with 0 tokens, cost, tool calls, `exec_count` and
  `audit_event_count` (spec §3.5; 1.2 builds still zeroed rows stopped on 06-26); those columns
  are not compared for such rows. A row's rollup date is its `stopped_at` (else `created_at`);
  a run row with no readable date is treated as legacy.
* NULL in main.db means the writer never filled that column (a column a later migration added
  without a default): not compared. A figure the ledger cannot give (table absent) is not
  compared either.
* A persistent VM resumed since its last stop keeps its old row (resume does not touch main.db)
  while its ledger grows: when every disagreeing column is *ahead* in the ledger, the verdict is
  `ahead` (a warning in the check, "stale" in the list) rather than `mismatch`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ROLLUP_STATUSES = ("stopped", "crashed", "vacuumed")

# main.db rollup column -> the cross-session index figure holding the same aggregate.
ROLLUP_FIGURES: dict[str, str] = {
    "total_requests": "requests",
    "allowed_requests": "allowed_requests",
    "denied_requests": "denied_requests",
    "total_input_tokens": "input_tokens",
    "total_output_tokens": "output_tokens",
    "total_estimated_cost": "cost_usd",
    "total_tool_calls": "tool_calls",
    "total_file_events": "file_events",
    "exec_count": "exec_events",
    "audit_event_count": "audit_events",
}
ROLLUP_COLUMNS = tuple(ROLLUP_FIGURES)

# 1.0 until 1.3 shipped (2026-06-27): `capsem run` rows were rolled up with zeros here
# (spec §3.5: handle_run wrote 0 tokens, cost and tool calls and never touched exec/audit).
LEGACY_RUN_ZEROED = (
    "total_input_tokens",
    "total_output_tokens",
    "total_estimated_cost",
    "total_tool_calls",
    "exec_count",
    "audit_event_count",
)
LEGACY_RUN_UNTIL = "2026-06-27"
# total_mcp_calls was dropped from the DDL on 2026-06-24 and is never written since.
MCP_COLUMN = "total_mcp_calls"
MCP_WRITTEN_UNTIL = "2026-06-24"

MISMATCH, AHEAD, OK = "mismatch", "ahead", "ok"
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Disagreement:
    column: str
    main_db: Any
    ledger: Any

    @property
    def ahead(self) -> bool:
        """The ledger holds more than the row recorded (a resumed VM kept writing)."""
        try:
            return float(self.ledger) > float(self.main_db)
        except (TypeError, ValueError):
            return False


@dataclass(frozen=True)
class RollupComparison:
    """`verdict` is None when the row cannot be compared (`reason` says why)."""

    verdict: str | None
    reason: str | None = None
    disagreements: tuple[Disagreement, ...] = ()
    compared: tuple[str, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)  # column -> why it was not compared

    @property
    def applicable(self) -> bool:
        return self.verdict is not None

    def as_dict(self) -> dict[str, dict[str, Any]]:
        """{column: {main_db, ledger}}, the list's JSON shape."""
        return {d.column: {"main_db": d.main_db, "ledger": d.ledger} for d in self.disagreements}

    def describe(self) -> str:
        return "; ".join(
            f"{d.column}: main.db {d.main_db}, ledger {d.ledger}" for d in self.disagreements
        )


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def same(recorded: Any, fresh: Any) -> bool:
    """Equal counters; sums of REAL costs agree to float rounding."""
    a, b = _number(recorded), _number(fresh)
    if a is None or b is None:
        return recorded == fresh
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def rollup_day(main_row: Mapping[str, Any]) -> str | None:
    """YYYY-MM-DD on which the row's counters were written: its stop, else its creation."""
    for column in ("stopped_at", "created_at"):
        value = main_row.get(column)
        if value is not None and _DAY.match(str(value)):
            return str(value)[:10]
    return None


def is_legacy_run(main_row: Mapping[str, Any]) -> bool:
    """A `capsem run` row rolled up before 2026-06-27, with 0 tokens, cost, tool calls and
    exec/audit counts."""
    if main_row.get("mode") != "run":
        return False
    day = rollup_day(main_row)
    return day is None or day < LEGACY_RUN_UNTIL


def unwritten_columns(main_row: Mapping[str, Any]) -> dict[str, str]:
    """Rollup columns the writer of this row never filled, with why: their values say nothing
    about the session (the list does not show them, the comparison skips them)."""
    found: dict[str, str] = {}
    if is_legacy_run(main_row):
        for column in LEGACY_RUN_ZEROED:
            found[column] = "capsem run rows stopped before 2026-06-27 were rolled up with 0 here"
    if MCP_COLUMN in main_row:
        day = rollup_day(main_row)
        if day is None or day >= MCP_WRITTEN_UNTIL:
            found[MCP_COLUMN] = "not written since 2026-06-24"
    for column in (*ROLLUP_COLUMNS, MCP_COLUMN):
        if column in main_row and main_row.get(column) is None and column not in found:
            found[column] = "NULL: never written for this row"
    return found


def is_persistent(main_row: Mapping[str, Any] | None, kind: str | None) -> bool:
    row = main_row or {}
    return kind == "persistent" or bool(row.get("persistent")) or row.get("mode") == "persistent"


def not_applicable_reason(main_row: Mapping[str, Any] | None, has_ledger: bool) -> str | None:
    if not main_row:
        return "the session has no main.db row"
    if main_row.get("status") not in ROLLUP_STATUSES:
        return "main.db is only rolled up when a session stops"
    if not has_ledger:
        return "no ledger on disk"
    return None


def compare_rollup(
    main_row: Mapping[str, Any] | None,
    fresh: Mapping[str, Any] | None,
    *,
    kind: str | None = None,
) -> RollupComparison:
    """Compare a main.db row with fresh ledger aggregates keyed by main.db column name.

    `fresh` is None when there is no readable ledger; a column missing from it (or None) is a
    figure the ledger cannot give. `kind` is the catalog kind, to recognise persistent VMs.
    """
    reason = not_applicable_reason(main_row, fresh is not None)
    if reason:
        return RollupComparison(None, reason)
    assert main_row is not None and fresh is not None
    skipped = unwritten_columns(main_row)
    compared, disagreements = [], []
    for column in ROLLUP_COLUMNS:
        if column not in main_row or column in skipped:
            continue
        if fresh.get(column) is None:
            skipped[column] = "the ledger has no table to count it from"
            continue
        compared.append(column)
        if not same(main_row[column], fresh[column]):
            disagreements.append(Disagreement(column, main_row[column], fresh[column]))
    if not disagreements:
        verdict = OK
    elif all(d.ahead for d in disagreements) and is_persistent(main_row, kind):
        verdict = AHEAD
    else:
        verdict = MISMATCH
    return RollupComparison(verdict, None, tuple(disagreements), tuple(compared), skipped)


def fresh_from_figures(figures: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Index figures (requests, input_tokens, ...) as main.db column names."""
    if figures is None:
        return None
    return {column: figures.get(figure) for column, figure in ROLLUP_FIGURES.items()}
