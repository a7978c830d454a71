"""Process memory hygiene for a long-running server that opens many SQLite files.

glibc gives each thread that allocates its own malloc arena and keeps freed memory in them;
with Datasette's SQL thread pool, the index thread and a connection per mounted ledger, RSS
settles well above what is live. Both calls are no-ops where glibc is not the allocator.
The long-lived heap is also kept out of Python's cyclic collector (`settle_heap`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import marshal
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

M_ARENA_MAX = -8  # mallopt parameter numbers, from glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
ARENAS = 2
# glibc's own default for both, which it raises as the process runs (below): kept there.
MMAP_THRESHOLD = 128 * 1024
TRIM_THRESHOLD = 128 * 1024
# What the operator may have chosen instead (glibc reads these at start).
_OPERATOR_CHOICES = {
    M_ARENA_MAX: ("MALLOC_ARENA_MAX", "glibc.malloc.arena_max"),
    M_MMAP_THRESHOLD: ("MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold"),
    M_TRIM_THRESHOLD: ("MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold"),
}
SETTLE_SECONDS = 600.0


def _libc():
    with contextlib.suppress(OSError):
        return ctypes.CDLL("libc.so.6")
    return None


def _operator_chose(parameter: int) -> bool:
    variable, tunable = _OPERATOR_CHOICES[parameter]
    return variable in os.environ or tunable in os.environ.get("GLIBC_TUNABLES", "")


def limit_malloc_arenas() -> None:
    """Cap glibc's per-thread arenas and keep its mmap and trim thresholds where they start,
    each unless the operator chose it (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_,
    MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES).

    By default glibc raises its mmap threshold to the size of each larger block freed (up to
    32 MB), and the trim threshold to twice that: once a server has built a list of 100,000
    sessions (lists and dicts of megabytes, freed), every later block under those sizes comes
    from the heap, and what is freed stays resident unless it is at the heap's top. The
    pages' one-off temporaries of that size (the cost box's aggregate in SQLite, a sort
    order's keys, a page's JSON) then left 5-15 MB behind at 100,000 sessions. Kept at
    128 KiB, a block that big is its own mapping, handed back when freed."""
    libc = _libc()
    if libc is None:
        return
    for parameter, value in (
        (M_ARENA_MAX, ARENAS),
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
    ):
        if not _operator_chose(parameter):
            with contextlib.suppress(AttributeError):
                libc.mallopt(parameter, value)


def settle_heap() -> None:
    """Collect, then move every object alive now out of the collector's generations.

    A server holds a large, long-lived heap (10,000 sessions' catalog, index snapshot and list
    rows: ~190,000 tracked objects): each full collection walked all of it, 60-100 ms holding
    the GIL about every 100 page requests (~1 ms per request, and the p90's spikes). Frozen
    objects are still freed when their last reference goes; only a reference cycle among them
    waits for the next settle, which unfreezes first."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


_last_settled = [float("-inf")]


def _full_settle_due() -> bool:
    """True (and the clock restarted) if no full settle ran in the last SETTLE_SECONDS."""
    now = time.monotonic()
    if now - _last_settled[0] < SETTLE_SECONDS:
        return False
    _last_settled[0] = now
    return True


def settle_heap_now_and_then() -> None:
    """`settle_heap` after an index refresh: the first of the process, then at most every
    SETTLE_SECONDS (one per process, however many instances it serves)."""
    if _full_settle_due():
        settle_heap()


def settle_new_objects() -> None:
    """Collect and freeze only what was allocated since the last freeze: the frozen heap is
    not walked again (a full `settle_heap` of a big process costs hundreds of ms)."""
    gc.collect()
    gc.freeze()


def release_memory() -> None:
    """Hand freed memory back to the OS after a large one-off job (an index refresh).

    The job's garbage is young: collecting the objects made since the last freeze finds it.
    A full settle (unfreeze, walk everything) stays at most every SETTLE_SECONDS: it used to
    run after every refresh that read 50 ledgers, twice in a row after the first."""
    if _full_settle_due():
        settle_heap()
    else:
        settle_new_objects()
    trim_malloc()


def trim_malloc() -> None:
    """Return glibc's free pages to the OS, also those between live blocks (a few ms for a
    heap of tens of MB): after a job that allocated and dropped many blocks larger than
    Python's small-object allocator serves (the list's whole rows, ~1 KB dicts each), the
    holes stay resident otherwise."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(AttributeError):
            libc.malloc_trim(0)


class ValuePool:
    """One object per distinct value, for values repeated across thousands of rows (a
    status, a Capsem version, the hash of one image, a verdict's sources): each row keeps a
    reference, not its own copy. SQLite hands out a new string per cell; at 10,000 sessions
    the copies cost megabytes. Values must be treated as read-only (they are shared)."""

    def __init__(self, limit: int = 50_000):
        self._limit = limit
        self._values: dict = {}

    def __call__(self, value):
        """`value`'s shared copy if it is a string (other values are returned as they are:
        1, 1.0 and True are equal keys, and must stay themselves)."""
        if type(value) is not str:
            return value
        return self.keyed(value, value)

    def keyed(self, key, value):
        """The object first pooled under `key` (a dict or list, keyed by its items)."""
        found = self._values.get(key)
        if found is None:
            if len(self._values) >= self._limit:
                self._values.clear()
            self._values[key] = found = value
        return found

    def strings(self, values: tuple) -> tuple:
        """A row's values with every string shared."""
        return tuple(self.keyed(value, value) if type(value) is str else value for value in values)


class CompactRow(Mapping[str, Any]):
    """One row as a read-only mapping: a tuple plus a column index shared by every row of one
    read. A dict per row costs about three times as much, and a server keeps 10,000 of them
    (main.db's sessions, the index's figures and verdicts)."""

    __slots__ = ("_columns", "_values")

    def __init__(self, columns: dict[str, int], values: tuple[Any, ...]):
        self._columns = columns
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[self._columns[key]]

    def get(self, key: str, default: Any = None) -> Any:
        # Mapping's own get goes through __getitem__ and a KeyError; sorting and filtering
        # the session list call this 10,000 times.
        index = self._columns.get(key)
        return default if index is None else self._values[index]

    def __contains__(self, key: object) -> bool:
        # Mapping's own goes through __getitem__ and a KeyError (the list asks 26 per row).
        return key in self._columns

    def items_repr(self) -> list[tuple[str, str]]:
        """sorted((column, repr(value))): what a digest of the row hashes, without a dict."""
        return sorted(zip(self._columns, map(repr, self._values), strict=True))

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __eq__(self, other: object) -> bool:
        # Two reads of one row compare by their tuples: a rescan compares 10,000 rows, and
        # Mapping's own __eq__ builds two dicts per row.
        if isinstance(other, CompactRow):
            return self._values == other._values and (
                self._columns is other._columns or self._columns == other._columns
            )
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # a mapping, like dict

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self)!r})"


def compact_rows(
    cursor,
    pool: ValuePool | None = None,
    extra: tuple[str, ...] = (),
    interned: tuple[str, ...] = (),
):
    """A cursor's rows as CompactRows sharing one column index (and, with `pool`, their
    strings); `extra` names columns appended after the cursor's, for `with_values`.
    `interned` names columns whose strings are `sys.intern`ed: a session id that the catalog
    holds too (interned there as well) is one string, not one per structure."""
    names = [d[0] for d in cursor.description] + list(extra)
    columns: dict[str, int] = {}
    for i, name in enumerate(names):
        columns.setdefault(name, i)  # a repeated name (`l.session_id, t.*`) is its first
    padding = (None,) * len(extra)
    shared = [columns[name] for name in interned if name in columns]
    for row in cursor:
        if shared:
            row = list(row)
            for i in shared:
                if type(row[i]) is str:
                    row[i] = sys.intern(row[i])
        values = pool.strings(tuple(row)) if pool is not None else tuple(row)
        yield CompactRow(columns, values + padding)


def with_values(row: CompactRow, **values: Any) -> CompactRow:
    """A copy of `row` with some of its columns' values replaced."""
    replaced = list(row._values)
    for key, value in values.items():
        replaced[row._columns[key]] = value
    return CompactRow(row._columns, tuple(replaced))


# A packed row's pooled cell that is not in its column's table (which holds up to 255
# values): the value is among the row's own, after the others.
_UNPOOLED = 255
POOLED_UP_TO = 64  # distinct values of a column in the first rows packed that make it pooled
# marshal's version 2 writes equal values as equal bytes (version 3 on marks a value its
# process holds elsewhere as a reference): packed rows are compared as bytes.
CANONICAL = 2
_PACKERS: list[RowPacker] = []  # a packed row's first byte is its packer's place here
_PACKERS_LOCK = threading.Lock()


class RowPacker:
    """Rows of one layout (a row class and its columns) packed into one `bytes` each.

    A big home's main.db rows, held whole, cost ~640 bytes a session as tuples of Python
    values (64 MB at 100,000 sessions); packed they cost about a quarter of that. A column
    whose values repeat (a status, a version, a VM's RAM: at most POOLED_UP_TO distinct ones
    in the first rows packed) is one byte, its value's place in a table the packer keeps
    (up to 255 values, append-only); the other values are `marshal`led, as they are (a str,
    int, float, bytes or None: SQLite's types). Unpacking makes a new row of the class, a
    few microseconds: for the rows a page shows, or once per session when a list is built.

    One packer per layout per process (`for_layout`), so a server that reads main.db again
    after every change reuses its tables, and a packed row says which packer made it in its
    first byte. Packed rows are for this process only: a row sent to another process
    (pickled) is unpacked first (`catalog/models.Session.__getstate__`)."""

    def __init__(self, number: int, row_class: type, columns: dict[str, int]):
        self.number = number
        self.row_class = row_class
        self.columns = columns
        self.width = max(columns.values(), default=-1) + 1
        self.pooled: tuple[int, ...] | None = None  # decided by the first rows packed
        self.tables: list[list] = []
        self._places: list[dict] = []
        self._lock = threading.Lock()

    @classmethod
    def for_layout(cls, row_class: type, columns: dict[str, int]) -> RowPacker | None:
        """The process's packer of this layout (None past 255 layouts: rows stay whole)."""
        with _PACKERS_LOCK:
            for packer in _PACKERS:
                if packer.row_class is row_class and packer.columns == columns:
                    return packer
            if len(_PACKERS) >= 255:  # a packed row names its packer in one byte
                return None
            packer = cls(len(_PACKERS), row_class, columns)
            _PACKERS.append(packer)
            return packer

    def pack(self, rows: list[tuple]) -> list[bytes]:
        """Each row (a tuple of `width` values) as bytes."""
        with self._lock:
            if self.pooled is None:
                self._choose(rows)
            pooled, places, tables = self.pooled, self._places, self.tables
            assert pooled is not None
            found = []
            head = bytes((self.number,))
            for row in rows:
                marks = bytearray()
                own = []
                for place, i in enumerate(pooled):
                    value = row[i]
                    key = (type(value), value)  # 1, 1.0 and True are equal keys
                    at = places[place].get(key)
                    if at is None and len(tables[place]) < _UNPOOLED:
                        at = places[place][key] = len(tables[place])
                        tables[place].append(value)
                    if at is None:
                        marks.append(_UNPOOLED)
                        own.append(value)
                    else:
                        marks.append(at)
                own = [row[i] for i in self._own] + own
                found.append(head + bytes(marks) + marshal.dumps(tuple(own), CANONICAL))
            return found

    def _choose(self, rows: list[tuple]) -> None:
        distinct = [set() for _ in range(self.width)]
        for row in rows:
            for i, value in enumerate(row):
                if len(distinct[i]) <= POOLED_UP_TO:
                    distinct[i].add((type(value), value))
        self.pooled = tuple(i for i in range(self.width) if len(distinct[i]) <= POOLED_UP_TO)
        self._own = tuple(i for i in range(self.width) if i not in self.pooled)
        self.tables = [[] for _ in self.pooled]
        self._places = [{} for _ in self.pooled]

    def unpack(self, packed: bytes):
        """The row `pack` made `packed` from, as a `row_class(columns, values)`."""
        pooled, tables = self.pooled, self.tables
        assert pooled is not None
        count = len(pooled)
        own = iter(marshal.loads(packed[1 + count :]))
        values: list[Any] = [None] * self.width
        for i in self._own:
            values[i] = next(own)
        for place, i in enumerate(pooled):
            at = packed[1 + place]
            values[i] = next(own) if at == _UNPOOLED else tables[place][at]
        return self.row_class(self.columns, tuple(values))


def unpack_row(packed: bytes | int):
    """A row `RowPacker.pack` made, unpacked by the packer that made it (`packed` may be
    its place in a `RowFile`)."""
    if type(packed) is int:
        packed = RowFile.read(packed)
    return _PACKERS[packed[0]].unpack(packed)


def is_packed(value: Any) -> bool:
    """Whether `value` is a row as `RowPacker` or `RowFile` hold it (not a mapping)."""
    return type(value) is bytes or type(value) is int


_FILES: list[RowFile] = []
_FILES_LOCK = threading.Lock()
# A place in a RowFile: its number (11 bits: 2,048 files a process, one per cache dir and
# purpose; a test process serves hundreds of cache dirs, and 128 ran out), its offset (36
# bits: 64 GiB a file) and its length, within 63 bits (a small int).
_PLACE_BITS, _LENGTH_BITS = 36, 16


class RowFile:
    """Packed rows kept in a file of the plugin's cache dir rather than in memory: a row is
    an `int` (its file, offset and length: 36 bytes) where its bytes cost ~180, and it is
    read back with one `pread` when asked for (a page's rows, a list build). The OS caches
    the file; its pages are not the process's memory. The file is unlinked as soon as it is
    opened: it goes with the process, and nothing of it is ever read by another.

    Rows are only appended; `put` takes the place an equal row already has (`same`, the
    previous read's place of that row), so reading main.db again after one session changed
    appends one row. One file per purpose and cache dir per process (`for_dir`)."""

    def __init__(self, number: int, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        handle, path = tempfile.mkstemp(dir=directory, prefix="rows-", suffix=".tmp")
        os.unlink(path)
        self.number, self.directory, self._fd, self._size = number, directory, handle, 0
        self._lock = threading.Lock()

    @classmethod
    def for_dir(cls, directory: Path, purpose: str) -> RowFile | None:
        """The process's file for `purpose` in `directory` (None if it cannot be made:
        rows stay in memory)."""
        key = (str(directory), purpose)
        with _FILES_LOCK:
            for found in _FILES:
                if found.key == key:
                    return found
            if len(_FILES) >= 1 << (63 - _PLACE_BITS - _LENGTH_BITS):
                return None
            try:
                found = cls(len(_FILES), Path(directory))
            except OSError:
                return None
            found.key = key
            _FILES.append(found)
            return found

    key: tuple = ()

    def put(self, packed: bytes, same: Any = None) -> bytes | int:
        """`packed`'s place in this file (`same` if that place holds these very bytes); the
        bytes themselves when they do not fit a place."""
        if type(same) is int and same >> (_PLACE_BITS + _LENGTH_BITS) == self.number:
            with contextlib.suppress(OSError):
                if RowFile.read(same) == packed:
                    return same
        if len(packed) >= 1 << _LENGTH_BITS:
            return packed
        with self._lock:
            offset = self._size
            if offset >= 1 << _PLACE_BITS:
                return packed
            try:
                os.pwrite(self._fd, packed, offset)
            except OSError:
                return packed
            self._size += len(packed)
        return (
            (self.number << (_PLACE_BITS + _LENGTH_BITS)) | (offset << _LENGTH_BITS) | len(packed)
        )

    @staticmethod
    def read(place: int) -> bytes:
        found = _FILES[place >> (_PLACE_BITS + _LENGTH_BITS)]
        length = place & ((1 << _LENGTH_BITS) - 1)
        offset = (place >> _LENGTH_BITS) & ((1 << _PLACE_BITS) - 1)
        return os.pread(found._fd, length, offset)


class PackedRows(dict):
    """key -> row, the rows held packed (`RowPacker`, about a third of a compact row with
    its values, or their place in a `RowFile`): `[key]` and `get` unpack a row (a new
    object each time); `packed(key)` is what is held, the same object until the row
    changes, for callers that compare rows."""

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        return unpack_row(value) if is_packed(value) else value

    def get(self, key, default=None):
        value = dict.get(self, key, default)
        return unpack_row(value) if is_packed(value) else value

    def packed(self, key, default=None):
        return dict.get(self, key, default)

    def values(self):
        """The rows, unpacked (`dict.values(rows)`: as held)."""
        return (unpack_row(v) if is_packed(v) else v for v in dict.values(self))

    def items(self):
        """(key, row), the rows unpacked (`dict.items(rows)`: as held)."""
        return ((k, unpack_row(v) if is_packed(v) else v) for k, v in dict.items(self))

    def __eq__(self, other: object) -> bool:
        """Equal rows by equal keys: two reads of a row are equal unpacked, wherever kept."""
        if not isinstance(other, dict):
            return NotImplemented
        if self.keys() != other.keys():
            return False
        for key, value in dict.items(self):
            known = dict.get(other, key)
            if value is known or value == known:
                continue
            mine = unpack_row(value) if is_packed(value) else value
            theirs = unpack_row(known) if is_packed(known) else known
            if mine != theirs:
                return False
        return True

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]


class StoredBytes(dict):
    """key -> bytes, held as their place in a `RowFile` (an int) or, where they could not be
    put there, as themselves: `bytes_of(key)` reads them back. Two mappings are equal when
    their keys hold equal bytes, wherever kept."""

    def bytes_of(self, key) -> bytes | None:
        value = dict.get(self, key)
        return RowFile.read(value) if type(value) is int else value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, dict):
            return NotImplemented
        if self.keys() != other.keys():
            return False
        read = other.bytes_of if isinstance(other, StoredBytes) else other.get
        return all(
            value is dict.get(other, key) or self.bytes_of(key) == read(key)
            for key, value in dict.items(self)
        )

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]


def stored_bytes(items, into: RowFile | None = None, previous: dict | None = None) -> StoredBytes:
    """(key, bytes) as a `StoredBytes`, kept in `into` (bytes equal to their `previous`
    ones keep that place); a string key is interned (a session id: the catalog's string)."""
    found = StoredBytes()
    for key, value in items:
        name = sys.intern(key) if type(key) is str else key
        same = dict.get(previous, name) if previous is not None else None
        found[name] = into.put(value, same) if into is not None else value
    return found


def packed_rows(
    cursor,
    key: str,
    into: RowFile | None = None,
    previous: dict | None = None,
    each: Callable[[tuple], None] | None = None,
) -> PackedRows:
    """A cursor's rows packed, by their `key` column's value (a string is interned: a
    session id is the catalog's own string); `into`: kept in that file, a row equal to its
    `previous` one in its place; `each` is called with every row as read."""
    columns: dict[str, int] = {}
    for i, d in enumerate(cursor.description):
        columns.setdefault(d[0], i)
    packer = RowPacker.for_layout(CompactRow, columns)
    at = columns[key]
    found = PackedRows()
    while batch := cursor.fetchmany(2000):
        packed = packer.pack(batch) if packer is not None else None
        for n, row in enumerate(batch):
            if each is not None:
                each(row)
            name = sys.intern(row[at]) if type(row[at]) is str else row[at]
            if packed is None:
                found[name] = CompactRow(columns, tuple(row))
            elif into is None:
                found[name] = packed[n]
            else:
                same = dict.get(previous, name) if previous is not None else None
                found[name] = into.put(packed[n], same)
    return found
