"""The session list: one row per catalog session, with figures from main.db or the ledger.

The rows are built once per (catalog scan, index refresh) and kept in memory, with their sort
orders; a request only filters and slices that list, so its cost does not depend on opening
any file, and stays in milliseconds at 10,000 sessions.

Which source a figure comes from (spec §3.5): main.db's rollup is written only when a session
stops, so a running session reads 0 there and a resumed persistent VM reads its previous stop.
Such a row is *stale* and the ledger's figures are used instead; a session without a main.db
row uses its ledger too. A stopped session whose rollup disagrees with its ledger is flagged
(spec §6.2 check 17) and shows main.db's figure with the ledger's beside it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from datasette.utils import tilde_encode

from datasette_capsem.catalog import CatalogSnapshot, Session
from datasette_capsem.index.service import IndexSnapshot

MAIN_DB, LEDGER = "main.db", "ledger"
# Figure -> (main.db columns, ledger total fields); a figure is the sum of its columns.
FIGURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cost": (("total_estimated_cost",), ("cost_usd",)),
    "requests": (("total_requests",), ("requests",)),
    "input_tokens": (("total_input_tokens",), ("input_tokens",)),
    "output_tokens": (("total_output_tokens",), ("output_tokens",)),
    "tokens": (("total_input_tokens", "total_output_tokens"), ("input_tokens", "output_tokens")),
    "tool_calls": (("total_tool_calls",), ("tool_calls",)),
    "mcp_calls": (("total_mcp_calls",), ("mcp_calls",)),
    "file_events": (("total_file_events",), ("file_events",)),
}
# main.db rollup column -> the ledger figure Capsem computes it from (spec §3.5).
ROLLUP_PAIRS = {
    "total_requests": "requests",
    "allowed_requests": "allowed_requests",
    "denied_requests": "denied_requests",
    "total_input_tokens": "input_tokens",
    "total_output_tokens": "output_tokens",
    "total_estimated_cost": "cost_usd",
    "total_tool_calls": "tool_calls",
    "total_mcp_calls": "mcp_calls",
    "total_file_events": "file_events",
    "exec_count": "exec_events",
    "audit_event_count": "audit_events",
}
ROLLUP_STATUSES = ("stopped", "crashed", "vacuumed")
SORTABLE = (
    "id", "name", "kind", "status", "created", "duration", "cost", "requests", "tokens",
    "tool_calls", "mcp_calls", "file_events", "has_ledger",
)  # fmt: skip
SORT_FIELDS = {"created": "created_at", "duration": "duration_seconds"}
CACHED_FILTERS = 64  # filter results kept per build, so paging through one costs a slice


def parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    text = str(value).strip().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def format_duration(seconds: float | None) -> str | None:
    """list_sessions.py's `Dur` column: Ns, XmYs or XhYm."""
    if seconds is None or seconds < 0:
        return None
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60}m"


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _sum(values: list[Any]) -> float | int | None:
    numbers = [_number(v) for v in values]
    if not numbers or any(n is None for n in numbers):
        return None
    return sum(numbers)  # type: ignore[arg-type]


def _agree(main: Any, ledger: Any) -> bool:
    if _number(main) is None or _number(ledger) is None:
        return main == ledger
    return math.isclose(main, ledger, rel_tol=1e-9, abs_tol=1e-9)


def stale_reason(session: Session, ledger: dict[str, Any] | None) -> str | None:
    """Why main.db's counters cannot be trusted for this session, or None."""
    if session.main_row is None:
        return None
    if session.status == "running":
        return "running: main.db counters are written only when a session stops"
    if ledger is None:
        return None
    if session.wal_present:
        return "the ledger has a live WAL: it is being written after main.db's rollup"
    stopped, last = parse_time(session.stopped_at), parse_time(ledger.get("last_event_at"))
    if stopped and last and last.replace(microsecond=0) > stopped:
        return "the ledger has events after main.db's recorded stop (resumed VM)"
    return None


def rollup_mismatches(session: Session, ledger: dict[str, Any] | None, stale: str | None):
    """{main.db column: {main_db, ledger}} for a stopped session whose rollup disagrees."""
    main = session.main_row
    if main is None or ledger is None or stale or session.status not in ROLLUP_STATUSES:
        return {}
    found = {}
    for column, figure in ROLLUP_PAIRS.items():
        present = column in main and ledger.get(figure) is not None
        if present and not _agree(main[column], ledger[figure]):
            found[column] = {"main_db": main[column], "ledger": ledger[figure]}
    return found


def _figures(session: Session, ledger: dict[str, Any] | None, stale: str | None):
    """(values, sources) per figure: main.db unless it is missing or stale, else the ledger;
    a stale main.db figure is still shown when there is no ledger to replace it."""
    main = session.main_row or {}
    values: dict[str, Any] = {}
    sources: dict[str, str | None] = {}
    for figure, (main_columns, ledger_fields) in FIGURES.items():
        in_main = bool(main) and all(c in main for c in main_columns)
        in_ledger = ledger is not None and all(ledger.get(f) is not None for f in ledger_fields)
        if in_main and not (stale and in_ledger):
            values[figure], sources[figure] = _sum([main[c] for c in main_columns]), MAIN_DB
        elif in_ledger:
            values[figure] = _sum([ledger[f] for f in ledger_fields])  # type: ignore[index]
            sources[figure] = LEDGER
        else:
            values[figure], sources[figure] = None, None
    return values, sources


def session_href(session_id: str, to: str | None = None) -> str:
    """The session's page (or a path under it): always keyed by id, never by name."""
    href = f"/-/capsem/sessions/{quote(session_id, safe='')}"
    return f"{href}/{to.lstrip('/')}" if to else href


def build_row(
    session: Session, index_row: dict[str, Any] | None, database_href: str | None = None
) -> dict[str, Any]:
    """The public JSON of one session in the list; `database_href` is its Datasette db."""
    problem = index_row.get("problem") if index_row else None
    ledger = index_row if index_row and not problem else None
    stale = stale_reason(session, ledger)
    values, sources = _figures(session, ledger, stale)
    created, stopped = parse_time(session.created_at), parse_time(session.stopped_at)
    duration = (stopped - created).total_seconds() if created and stopped else None
    row = {
        **session.summary(),
        "created": created.strftime("%m-%d %H:%M:%S") if created else None,
        "duration_seconds": duration,
        "duration": "running" if session.status == "running" else format_duration(duration),
        **values,
        "sources": sources,
        "main_db_stale": stale,
        "rollup_mismatch": rollup_mismatches(session, ledger, stale),
        "indexed": index_row is not None,
        "index_problem": problem,
        "href": session_href(session.id),
        "database_href": database_href if session.has_ledger else None,
    }
    return row


@dataclass
class _Built:
    key: tuple
    rows: list[dict[str, Any]] = field(default_factory=list)
    orders: dict[tuple[str, bool], list[dict[str, Any]]] = field(default_factory=dict)
    filtered: dict[tuple, list[dict[str, Any]]] = field(default_factory=dict)


def _sort_key(column: str, descending: bool):
    name = SORT_FIELDS.get(column, column)

    def key(row: dict[str, Any]):
        value = row.get(name)
        if isinstance(value, str):
            value = value.lower()
        # Missing values last in both directions.
        return (value is not None) if descending else (
            value is None
        ), value if value is not None else 0

    return key


class SessionTable:
    """The in-memory session list, rebuilt only when the catalog or the index changed."""

    def __init__(self, database_name: Callable[[Session], str] = lambda s: s.id):
        self.database_name = database_name
        self._built = _Built(key=())
        self._lock = threading.Lock()

    def rows(self, catalog: CatalogSnapshot, index: IndexSnapshot) -> _Built:
        key = (id(catalog), catalog.scanned_at, index.generation)
        built = self._built
        if built.key != key:
            with self._lock:
                if self._built.key != key:
                    self._built = self._build(key, catalog, index)
                built = self._built
        return built

    def _build(self, key: tuple, catalog: CatalogSnapshot, index: IndexSnapshot) -> _Built:
        sessions = sorted(
            catalog.sessions.values(), key=lambda s: (s.created_at or "", s.id), reverse=True
        )
        rows = [
            build_row(s, index.ledgers.get(s.id), "/" + tilde_encode(self.database_name(s)))
            for s in sessions
        ]
        return _Built(key, rows)

    def ordered(self, built: _Built, column: str, descending: bool) -> list[dict[str, Any]]:
        """Rows sorted by one column, computed once per build and column."""
        order = built.orders.get((column, descending))
        if order is None:
            order = sorted(built.rows, key=_sort_key(column, descending), reverse=descending)
            built.orders[(column, descending)] = order
        return order

    def filtered(
        self,
        built: _Built,
        order: tuple[str, bool],
        signature: tuple,
        select: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    ) -> list[dict[str, Any]]:
        """`select` applied to one sort order, remembered for the last few filters."""
        key = (order, signature)
        found = built.filtered.get(key)
        if found is None:
            found = select(self.ordered(built, *order))
            if len(built.filtered) >= CACHED_FILTERS:
                built.filtered.pop(next(iter(built.filtered)), None)
            built.filtered[key] = found
        return found
