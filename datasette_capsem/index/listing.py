"""The session list: one row per catalog session, with figures from main.db or the ledger.

The list is built once per (catalog scan, index refresh) and kept in memory, with its sort
orders; a request only filters and slices it, so its cost does not depend on opening any file,
and stays in milliseconds at 10,000 sessions. What is kept for every session is its place
in the list's `Columns` (~100 bytes): the fields sorting, filters, charts and facets read
(`ListEntry` reads them there), and the inputs its row is built from; the whole row (links,
sources, reasons, the verdict) is built only for the rows a page shows
(`SessionTable.full_rows`), and the last FULL_ROWS of them are kept. At 10,000 sessions the
whole rows cost ~17 MB, the columns ~1 MB; sort orders and filters are arrays of places.

Which source a figure comes from (spec §3.5): main.db's rollup is written only when a session
stops, so a running session reads 0 there and a resumed persistent VM reads its previous stop.
Such a row is *stale* and the ledger's figures are used instead; a session without a main.db
row uses its ledger too, and so does a column the row's writer never filled (total_mcp_calls
after 2026-06-24; tokens, cost, tool calls, exec and audit counts of capsem run rows stopped before
2026-06-27; NULLs).
MCP calls come from the ledger whenever there is one.

A stopped session whose rollup disagrees with its ledger is flagged (spec §6.2 check 17) and
shows main.db's figure with the ledger's beside it. The comparison is
`ledger/rollup.py::compare_rollup`, the same one the integrity check runs, so the list and the
check flag the same sessions; a persistent VM whose ledger is ahead of its row is shown stale,
as the check's warning says, rather than flagged.

A fork's ledger figures here are its whole file, copied parent rows included, as main.db
counts them; the index's cross-session totals count those rows once, for the parent.
"""

from __future__ import annotations

import heapq
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from datasette.utils import tilde_encode

from datasette_capsem.catalog import CatalogSnapshot, Session
from datasette_capsem.index import verdicts
from datasette_capsem.index.service import IndexSnapshot
from datasette_capsem.ledger import rollup
from datasette_capsem.ledger.times import parse_time
from datasette_capsem.memory import (
    CompactRow,
    PackedRows,
    ValuePool,
    is_packed,
    trim_malloc,
    unpack_row,
)
from datasette_capsem.urls import Urls

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
# Figures the ledger answers better than main.db whenever it is there: total_mcp_calls is a
# column current Capsem never writes and no older writer's count of it can be checked.
LEDGER_FIRST = ("mcp_calls",)
SORTABLE = (
    "id",
    "home",
    "name",
    "kind",
    "status",
    "created",
    "duration",
    "cost",
    "requests",
    "tokens",
    "tool_calls",
    "mcp_calls",
    "file_events",
    "has_ledger",
    "verdict",
)
SORT_FIELDS = {"created": "created_at", "duration": "duration_seconds", "verdict": "verdict_rank"}
CACHED_FILTERS = 64  # filter results kept per build, so paging through one costs a slice
CACHED_RENDERINGS = 16  # rendered pages of rows kept per build (about 100 KB each)
# Whole rows kept, most recently shown first: a page of 100, `_size=max` (1,000) of one list.
FULL_ROWS = 1000
TRIM_AFTER_ROWS = 200  # a build that made this many rows hands their memory back (memory.py)

ROOT_URLS = Urls()
# The list keeps a row per session (10,000 on a big machine): parts most rows have in common
# (which source each figure came from, a verdict's kinds, "4h25m") are one shared object each.
# Rows are read-only once built; views copy a row to change it (views/home.py).
SHARED = ValuePool()


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
    if len(values) == 1:  # the row's own object, not a copy (0 + x is a new float)
        return _number(values[0])
    numbers = [_number(v) for v in values]
    if not numbers or any(n is None for n in numbers):
        return None
    return sum(numbers)  # type: ignore[arg-type]


def compare(
    session: Session, ledger: dict[str, Any] | None, main: Any = None
) -> rollup.RollupComparison:
    """The shared rollup comparison of a session's main.db row (`main`, when the caller has
    unpacked it already) with its whole ledger file."""
    main = session.main_row if main is None else main
    return rollup.compare_rollup(main, rollup.fresh_from_figures(ledger), kind=session.kind)


def stale_reason(
    session: Session,
    ledger: dict[str, Any] | None,
    comparison: rollup.RollupComparison | None = None,
) -> str | None:
    """Why main.db's counters cannot be trusted for this session, or None."""
    if not session.in_main_db:
        return None
    if session.status == "running":
        return "running: main.db counters are written only when a session stops"
    if ledger is None:
        return None
    if session.live:  # a dead writer's WAL rows were in the rollup (session_index.rs:87-99)
        return "the ledger has a live WAL: it is being written after main.db's rollup"
    comparison = comparison or compare(session, ledger)
    if comparison.verdict == rollup.AHEAD:
        return (
            "the ledger is ahead of main.db's rollup: a resumed persistent VM keeps its old "
            f"row until it stops again ({comparison.describe()})"
        )
    stopped, last = parse_time(session.stopped_at), parse_time(ledger.get("last_event_at"))
    if stopped and last and last.replace(microsecond=0) > stopped:
        return "the ledger has events after main.db's recorded stop (resumed VM)"
    return None


def rollup_mismatches(
    session: Session,
    ledger: dict[str, Any] | None,
    comparison: rollup.RollupComparison | None = None,
) -> dict[str, dict[str, Any]]:
    """{main.db column: {main_db, ledger}} for a stopped session whose rollup disagrees."""
    comparison = comparison or compare(session, ledger)
    return comparison.as_dict() if comparison.verdict == rollup.MISMATCH else {}


def _figures(session: Session, ledger: dict[str, Any] | None, stale: str | None, main: Any = None):
    """(values, sources) per figure: main.db unless it is missing, stale or a column its writer
    never filled, else the ledger; a stale main.db figure is still shown when there is no
    ledger to replace it. `main`: the session's main.db row, if the caller unpacked it."""
    main = (session.main_row if main is None else main) or {}
    unwritten = rollup.unwritten_columns(main) if main else {}
    values: dict[str, Any] = {}
    sources: dict[str, str | None] = {}
    for figure, (main_columns, ledger_fields) in FIGURES.items():
        in_main = bool(main) and all(c in main and c not in unwritten for c in main_columns)
        in_ledger = ledger is not None and all(ledger.get(f) is not None for f in ledger_fields)
        if in_ledger and figure in LEDGER_FIRST:
            values[figure] = _sum([ledger[f] for f in ledger_fields])  # type: ignore[index]
            sources[figure] = LEDGER
        elif in_main and not (stale and in_ledger):
            values[figure], sources[figure] = _sum([main[c] for c in main_columns]), MAIN_DB
        elif in_ledger:
            values[figure] = _sum([ledger[f] for f in ledger_fields])  # type: ignore[index]
            sources[figure] = LEDGER
        else:
            values[figure], sources[figure] = None, None
    return values, sources


def build_row(
    session: Session,
    index_row: dict[str, Any] | None,
    database_href: str | None = None,
    stored_check: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The public JSON of one session in the list; `database_href` is its Datasette db;
    `stored_check` the index's quick-check verdict of the session (None: pending), and
    `index_row` its ledger's figures, each as a mapping or packed, as the index snapshot
    holds them (`IndexSnapshot.held_for_session`, memory.PackedRows).

    `index_row` is the index's row of the session's ledger file; for a fork its figures are
    its own rows, and `file_totals` the whole file, which is what this row shows and compares.
    """
    if is_packed(index_row):
        index_row = unpack_row(index_row)
    problem = index_row.get("problem") if index_row else None
    ledger = None
    if index_row and not problem:
        ledger = index_row.get("file_totals") or index_row
    main = session.main_row  # unpacked once (catalog/models.Session)
    comparison = compare(session, ledger, main)
    stale = stale_reason(session, ledger, comparison)
    values, sources = _figures(session, ledger, stale, main)
    created, stopped = parse_time(session.created_at), parse_time(session.stopped_at)
    duration = (stopped - created).total_seconds() if created and stopped else None
    mismatch = rollup_mismatches(session, ledger, comparison)
    row = {
        **session.summary(),
        "created": created.strftime("%m-%d %H:%M:%S") if created else None,
        "duration_seconds": duration,
        "duration": SHARED("running" if session.status == "running" else format_duration(duration)),
        **values,
        "sources": SHARED.keyed(("sources", *sources.items()), sources),
        "main_db_stale": stale,
        "rollup": comparison.verdict,
        "rollup_mismatch": mismatch if mismatch else SHARED.keyed(("rollup_mismatch",), mismatch),
        "indexed": index_row is not None,
        "inherited_from": index_row.get("inherited_from") if index_row else None,
        "index_problem": problem,
        "href": ROOT_URLS.session(session.id),  # root-relative; the page prefixes base_url
        "database_href": database_href if session.has_ledger else None,
    }
    if session.home:
        row["home_href"] = ROOT_URLS.sessions(home=session.home)
    if is_packed(stored_check):  # as the index snapshot holds it (memory.PackedRows)
        stored_check = unpack_row(stored_check)
    verdict = verdicts.list_verdict(stored_check, session)
    verdict["kinds"] = SHARED.keyed(("kinds", *verdict["kinds"]), verdict["kinds"])
    row["problems"] = SHARED.keyed(("problems", *row["problems"]), row["problems"])
    rank = verdict.pop("rank")
    row["verdict_rank"] = SHARED.keyed(("rank", *map(repr, rank)), rank) if rank else rank
    verdict["href"] = ROOT_URLS.check(session.id)
    row["verdict"] = verdict
    return row


# An entry's numbers, a float each in an array: what sorting and filters read (a row's
# input and output tokens only its whole row shows: their sum is `tokens`).
NUMBERS = ("duration_seconds", *(f for f in FIGURES if f not in ("input_tokens", "output_tokens")))
# What a list entry answers of its row: what sorting (SORTABLE, SORT_FIELDS), filters
# (index/filters.py), charts (index/charts.py) and facets read; "home" is None when unlabelled.
ENTRY_FIELDS = (
    "id",
    "home",
    "name",
    "kind",
    "status",
    "created_at",
    *NUMBERS,
    "has_ledger",
    "verdict_rank",
    "verdict",
)
VERDICT_FIELDS = ("state", "errors", "warnings", "kinds")  # of the row's verdict, for filters
VERDICT_COLUMNS = {name: i for i, name in enumerate(VERDICT_FIELDS)}
_NONE = float("nan")  # a missing number in an array of them


class Columns:
    """The list's sessions, column by column: what a row of the list holds, without an
    object per session (100,000 in a big home: a tuple of 23 cells and the figures' own
    numbers cost ~400 bytes a session, these ~110). The fields an entry reads of its session
    (id, name, kind, status, created_at, has_ledger, home) are read from the `Session`;
    the figures (NUMBERS) are floats in an array each (a count, an integer, is compared and
    sorted the same as a float); the verdict a shared summary and rank (most sessions have
    one of a few). `inputs(at)` are what the whole row is built from (`build_row`)."""

    __slots__ = ("sessions", "index_rows", "checks", "numbers", "verdicts", "ranks")

    def __init__(self) -> None:
        self.sessions: list[Session] = []
        self.index_rows: list[Any] = []
        self.checks: list[Any] = []  # stored verdicts as the index holds them (packed)
        self.numbers = {name: array("d") for name in NUMBERS}
        self.verdicts: list[CompactRow] = []
        self.ranks: list[Any] = []

    def __len__(self) -> int:
        return len(self.sessions)

    def inputs(self, at: int) -> tuple:
        return (self.sessions[at], self.index_rows[at], self.checks[at])

    def add(self, inputs: tuple, row: dict[str, Any]) -> None:
        """A session's entry from its whole row (`build_row`)."""
        session, index_row, check = inputs
        self.sessions.append(session)
        self.index_rows.append(index_row)
        self.checks.append(check)
        for name, column in self.numbers.items():
            value = row.get(name)
            column.append(_NONE if value is None else value)
        summary = tuple(row["verdict"][name] for name in VERDICT_FIELDS)
        key = ("entry verdict", *summary[:3], *summary[3])
        self.verdicts.append(SHARED.keyed(key, CompactRow(VERDICT_COLUMNS, summary)))
        self.ranks.append(row.get("verdict_rank"))

    def copy(self, other: Columns, at: int) -> None:
        """Another list's entry `at`, unchanged (its inputs are this one's)."""
        self.sessions.append(other.sessions[at])
        self.index_rows.append(other.index_rows[at])
        self.checks.append(other.checks[at])
        for name, column in self.numbers.items():
            column.append(other.numbers[name][at])
        self.verdicts.append(other.verdicts[at])
        self.ranks.append(other.ranks[at])


def _number_field(name: str) -> Callable[[Columns, int], Any]:
    def get(c: Columns, at: int):
        value = c.numbers[name][at]
        return None if value != value else value

    return get


_FIELDS: dict[str, Callable[[Columns, int], Any]] = {
    "id": lambda c, at: c.sessions[at].id,
    "home": lambda c, at: c.sessions[at].home or None,
    "name": lambda c, at: c.sessions[at].display_name,
    "kind": lambda c, at: c.sessions[at].kind,
    "status": lambda c, at: c.sessions[at].status,
    "created_at": lambda c, at: c.sessions[at].created_at,
    **{name: _number_field(name) for name in NUMBERS},
    "has_ledger": lambda c, at: c.sessions[at].has_ledger,
    "verdict_rank": lambda c, at: c.ranks[at],
    "verdict": lambda c, at: c.verdicts[at],
}


class ListEntry(Mapping[str, Any]):
    """One session in the list: the fields of its row that sorting and filtering read, as a
    read-only mapping over its list's `Columns`, and the inputs its whole row is built from
    (`SessionTable.full_rows`). Made when asked for (a page's rows, a filter's pass)."""

    __slots__ = ("_columns", "_at")

    def __init__(self, columns: Columns, at: int):
        self._columns = columns
        self._at = at

    def __getitem__(self, key: str) -> Any:
        return _FIELDS[key](self._columns, self._at)

    def get(self, key: str, default: Any = None) -> Any:
        read = _FIELDS.get(key)
        return default if read is None else read(self._columns, self._at)

    def __contains__(self, key: object) -> bool:
        return key in _FIELDS

    def __iter__(self):
        return iter(ENTRY_FIELDS)

    def __len__(self) -> int:
        return len(ENTRY_FIELDS)

    @property
    def inputs(self) -> tuple:
        """(session, index row, stored check): objects the catalog and index keep."""
        return self._columns.inputs(self._at)

    def __repr__(self) -> str:
        return f"ListEntry({dict(self)!r})"


def list_entry(row: dict[str, Any], inputs: tuple) -> ListEntry:
    """The entry of one built row, on a list of its own (e.g. a row made by hand)."""
    columns = Columns()
    columns.add(inputs, row)
    return ListEntry(columns, 0)


# An entry's place in its list's `Columns`: 4 bytes (a list of up to 2**31 sessions). Each
# sort order and each of the CACHED_FILTERS filters kept holds one per entry it has.
PLACE = "i"


class Rows(Sequence):
    """Some entries of one list, in an order: their places in its `Columns` (an array of
    integers, 4 bytes an entry, where a list of entries costs an object each). Indexing and
    iterating make the entries (`ListEntry`)."""

    __slots__ = ("columns", "places")

    def __init__(self, columns: Columns, places: array | None = None):
        self.columns = columns
        self.places = array(PLACE, range(len(columns))) if places is None else places

    def __len__(self) -> int:
        return len(self.places)

    def __getitem__(self, at):
        if isinstance(at, slice):
            return [ListEntry(self.columns, i) for i in self.places[at]]
        return ListEntry(self.columns, self.places[at])

    def __iter__(self):
        columns = self.columns
        return (ListEntry(columns, i) for i in self.places)

    @classmethod
    def of(cls, columns: Columns, entries) -> Rows:
        """`entries` of `columns` (e.g. a filter's result) as places."""
        if isinstance(entries, Rows):
            return entries
        return cls(columns, array(PLACE, (entry._at for entry in entries)))


# A list of more sessions than this is never built inside a request: a request that finds no
# list for the current catalog scan and index generation gets the last complete list, or
# before the first one a provisional list of the newest PROVISIONAL_ROWS sessions, while a
# thread builds the whole one (100,000 rows take seconds). A smaller list is built at once.
BUILD_IN_REQUEST_UP_TO = 5000
PROVISIONAL_ROWS = 500


@dataclass
class _Built:
    key: tuple
    rows: Rows = field(default_factory=lambda: Rows(Columns()))
    # Set on a list that is not the whole current one: {"sessions": how many the catalog
    # has, "shown": how many this list holds (None: all of an older list)}
    partial: dict[str, Any] | None = None
    orders: dict[tuple[str, bool], Rows] = field(default_factory=dict)
    filtered: dict[tuple, Rows] = field(default_factory=dict)
    # What a view made of these rows (e.g. a page of them as HTML), by the view's own key;
    # dropped with the build, so never older than the catalog scan and index generation.
    rendered: dict[tuple, Any] = field(default_factory=dict)

    def remember(self, key: tuple, value: Any) -> None:
        if len(self.rendered) >= CACHED_RENDERINGS:
            self.rendered.pop(next(iter(self.rendered)), None)
        self.rendered[key] = value


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


def _held(checks: dict, session_id: str):
    """A session's stored verdict as `checks` holds it (packed: compared, not read)."""
    return checks.packed(session_id) if isinstance(checks, PackedRows) else checks.get(session_id)


def _same_inputs(known: tuple, inputs: tuple) -> bool:
    """Whether a row's inputs are unchanged: the same objects, or a session rescanned equal
    (a catalog rescan makes every Session anew)."""
    if any(a is not b and a != b for a, b in zip(known[1:], inputs[1:], strict=True)):
        return False
    return known[0] is inputs[0] or known[0] == inputs[0]


def _same_objects(known: tuple, inputs: tuple) -> bool:
    return all(a is b for a, b in zip(known, inputs, strict=True))


class SessionTable:
    """The in-memory session list, rebuilt only when the catalog or the index changed."""

    def __init__(self, database_name: Callable[[Session], str] = lambda s: s.id):
        self.database_name = database_name
        self._built = _Built(key=())
        self._lock = threading.Lock()
        # The last whole list's entries (with their inputs: session, index row, stored
        # check): a rebuild after one ledger changed builds one row, not 10,000 (the index
        # keeps unchanged rows' objects).
        self._memo = Columns()
        # session id -> (its entry's inputs, its whole row), the rows shown last (FULL_ROWS).
        self._rows: OrderedDict[str, tuple[tuple, dict[str, Any]]] = OrderedDict()
        self._rows_lock = threading.Lock()
        self.build_in_request_up_to = BUILD_IN_REQUEST_UP_TO
        self.provisional_rows = PROVISIONAL_ROWS
        self._builder: threading.Thread | None = None
        self._builder_lock = threading.Lock()
        self._provisional_list: tuple[tuple, _Built] | None = None

    def rows(self, catalog: CatalogSnapshot, index: IndexSnapshot, wait: bool = True) -> _Built:
        """The list of this catalog scan and index generation. `wait=False` (a request):
        a big list is never built here (BUILD_IN_REQUEST_UP_TO): the last complete list, or a
        provisional one, is answered while a thread builds it."""
        key = (id(catalog), catalog.scanned_at, index.generation)
        built = self._built
        if built.key == key:
            return built
        if not wait and len(catalog.sessions) > self.build_in_request_up_to:
            if index.generation:  # not while the index's figures are still being read
                self._build_soon(catalog, index)
            if built.key:  # the last complete list: one refresh behind, whole
                return replace(built, partial={"sessions": len(catalog.sessions), "shown": None})
            return self._provisional(catalog, index)
        with self._lock:
            if self._built.key != key:
                self._built = self._build(key, catalog, index)
            return self._built

    @staticmethod
    def scanning() -> _Built:
        """An empty list that says the home's sessions are still being read (the first scan
        after a start)."""
        return _Built(key=(), partial={"sessions": None, "shown": 0})

    def _build_soon(self, catalog: CatalogSnapshot, index: IndexSnapshot) -> None:
        """Build the list of `catalog` and `index` in a thread, unless one is building."""
        with self._builder_lock:
            if self._builder is not None and self._builder.is_alive():
                return
            self._builder = threading.Thread(
                target=self.rows, args=(catalog, index), name="capsem-list-build", daemon=True
            )
            self._builder.start()

    def _provisional(self, catalog: CatalogSnapshot, index: IndexSnapshot) -> _Built:
        """The newest PROVISIONAL_ROWS sessions as a list, until the whole one is built."""
        key = (id(catalog), catalog.scanned_at, index.generation)
        known = self._provisional_list
        if known is not None and known[0] == key:
            return known[1]
        newest = heapq.nlargest(
            self.provisional_rows,
            catalog.sessions.values(),
            key=lambda s: (s.created_at or "", s.id),
        )
        columns = Columns()
        for session in newest:
            inputs = (
                session,
                index.held_for_session(session.id),
                _held(index.checks, session.id),
            )
            columns.add(inputs, self._whole_row(inputs))
        partial = {"sessions": len(catalog.sessions), "shown": len(columns)}
        built = _Built(key=(), rows=Rows(columns), partial=partial)
        self._provisional_list = (key, built)
        return built

    def _build(self, key: tuple, catalog: CatalogSnapshot, index: IndexSnapshot) -> _Built:
        sessions = sorted(
            catalog.sessions.values(), key=lambda s: (s.created_at or "", s.id), reverse=True
        )
        checks, old = index.checks, self._memo
        places = {session.id: at for at, session in enumerate(old.sessions)}  # while building
        columns = Columns()
        made = 0
        for session in sessions:
            inputs = (session, index.held_for_session(session.id), _held(checks, session.id))
            at = places.get(session.id)
            if at is not None and _same_inputs(old.inputs(at), inputs):
                columns.copy(old, at)
                if old.sessions[at] is not session:  # rescanned equal: the current object
                    columns.sessions[-1] = session
            else:
                columns.add(inputs, self._whole_row(inputs))
                made += 1
        del places
        self._memo = columns
        if made >= TRIM_AFTER_ROWS:
            trim_malloc()
        return _Built(key, Rows(columns))

    def _whole_row(self, inputs: tuple) -> dict[str, Any]:
        session, index_row, check = inputs
        href = "/" + tilde_encode(self.database_name(session))
        return build_row(session, index_row, href, check)

    def full_rows(self, entries) -> list[dict[str, Any]]:
        """The public rows (`build_row`) of some entries, e.g. the page shown; the same
        objects for the same inputs while they are among the FULL_ROWS shown last."""
        with self._rows_lock:
            return [self._full_row(entry) for entry in entries]

    def _full_row(self, entry: ListEntry) -> dict[str, Any]:
        session_id = entry["id"]
        known = self._rows.get(session_id)
        if known is not None and _same_objects(known[0], entry.inputs):
            self._rows.move_to_end(session_id)
            return known[1]
        row = self._whole_row(entry.inputs)
        self._rows[session_id] = (entry.inputs, row)
        self._rows.move_to_end(session_id)
        while len(self._rows) > FULL_ROWS:
            self._rows.popitem(last=False)
        return row

    def ordered(self, built: _Built, column: str, descending: bool) -> Rows:
        """Entries sorted by one column, computed once per build and column."""
        order = built.orders.get((column, descending))
        if order is None:
            rows, key = built.rows, _sort_key(column, descending)
            keys = [key(entry) for entry in rows]
            places = sorted(range(len(keys)), key=keys.__getitem__, reverse=descending)
            order = Rows(rows.columns, array(PLACE, (rows.places[at] for at in places)))
            built.orders[(column, descending)] = order
            if len(keys) > BUILD_IN_REQUEST_UP_TO:  # a key and a place per entry, freed
                del keys, places
                trim_malloc()
        return order

    def filtered(
        self,
        built: _Built,
        order: tuple[str, bool],
        signature: tuple,
        select: Callable[[Rows], Any],
    ) -> Rows:
        """`select` applied to one sort order, remembered for the last few filters."""
        key = (order, signature)
        found = built.filtered.get(key)
        if found is None:
            ordered = self.ordered(built, *order)
            found = Rows.of(ordered.columns, select(ordered))
            if len(built.filtered) >= CACHED_FILTERS:
                built.filtered.pop(next(iter(built.filtered)), None)
            built.filtered[key] = found
        return found
