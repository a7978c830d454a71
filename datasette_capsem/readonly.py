"""The one place that opens Capsem's SQLite files, without ever changing a byte of them.

SQLite's ``mode=ro`` is not enough on its own (spec §4.7): beside a WAL-mode file with no
``-wal``/``-shm`` it creates both. So each file gets the open mode that touches nothing:

* WAL-mode file with no ``-wal`` on disk, or an empty one (finished session): ``immutable=1``;
  nothing can be pending because no WAL holds it. A 0-byte ``-wal`` with a 32 KiB ``-shm`` is
  what any ``mode=ro`` reader leaves beside a finished ledger (Capsem's own scripts included,
  spec §4.7): it is not a writer.
* a non-empty ``-wal`` and its ``-shm`` (live, or unclean stop): ``mode=ro``, which reads the
  WAL's committed frames; SQLite's reader bookkeeping in the existing ``-shm`` is the only write.
* a non-empty ``-wal`` without ``-shm``: ``mode=ro`` would create the ``-shm``, so read a snapshot copy
  of both files from the plugin's cache instead.
* rollback-journal file: ``mode=ro`` creates nothing.
* legacy ``session.db.gz``: decompressed once into the cache and opened ``immutable=1``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import sqlite3
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

T = TypeVar("T")
SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100
CACHE_KIB = 512
MAX_DECOMPRESSED_BYTES = 8 << 30  # a legacy ledger is a few MB; refuse a gzip bomb
# Reads of a file that changed under them (a writer checkpointing and removing its WAL
# between two stats, or while it was copied) are tried this many times in all.
SETTLE_TRIES = 3


class LedgerUnavailable(Exception):
    """A Capsem file that cannot be read. ``kind`` is one of findings.BROKEN_FILE_KINDS, or
    a state of the moment: ``missing`` (gone from disk), ``evicted`` (unmounted while asked),
    ``too_large`` (a legacy .gz that decompresses beyond MAX_DECOMPRESSED_BYTES), ``copying``
    (the file changed between two stats: a copy or sync is writing it)."""

    def __init__(self, kind: str, path: Path, detail: str):
        self.kind = kind
        self.path = path
        self.detail = detail
        super().__init__(f"{path}: {detail}")

    @property
    def copy_in_progress(self) -> bool:
        """What a copy or sync still writing the file leaves: cut short, or still growing."""
        return self.kind in ("copying", "truncated", "zero_bytes")

    def describe(self) -> str:
        """One line for a page: the kind, the detail, and a copy in progress named as such."""
        copy = (
            " (copy in progress?: read again once it is complete)" if self.copy_in_progress else ""
        )
        return f"{self.kind}: {self.detail}{copy}"


@dataclass(frozen=True)
class FileState:
    """What the filesystem says about a SQLite file and its WAL companions."""

    path: Path
    size: int
    mtime_ns: int
    wal_mode: bool
    wal_size: int | None  # None when there is no -wal file
    wal_mtime_ns: int | None
    shm_exists: bool

    @property
    def fingerprint(self) -> tuple:
        """Changes whenever a writer could have added rows."""
        return (self.size, self.mtime_ns, self.wal_size, self.wal_mtime_ns)

    @property
    def stat_fingerprint(self) -> tuple:
        """`file_fingerprint` of the file as this state saw it (no further stat)."""
        wal = None if self.wal_size is None else (self.wal_size, self.wal_mtime_ns)
        return ((self.size, self.mtime_ns), wal)

    @cached_property
    def mode(self) -> str:  # cached: asked before and after each query of a mounted file
        if self.path.suffix == ".gz":
            return "gz"
        if self.wal_size:  # a WAL holding frames: committed rows may be only there
            return "ro" if self.shm_exists else "snapshot"
        return "immutable" if self.wal_mode else "ro"


def file_fingerprint(path: Path | str) -> tuple:
    """The one file fingerprint: (size, mtime_ns) of a ledger and of its `-wal` (None when
    absent). Two stats, no read; it changes whenever a writer appears, leaves or adds frames."""
    result = []
    for candidate in (str(path), f"{path}-wal"):
        try:
            stat = os.stat(candidate)
            result.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            result.append(None)
    return tuple(result)


def _stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def _changed_since(path: Path, before: os.stat_result) -> bool:
    after = _stat_or_none(path)
    return after is None or (after.st_size, after.st_mtime_ns) != (
        before.st_size,
        before.st_mtime_ns,
    )


def _check_header(path: Path, header: bytes, size: int, live: bool = False) -> None:
    """Reject files SQLite would fail on. `live`: a WAL is present, so a checkpoint may be
    writing the file right now and its header can promise pages not yet on disk."""
    if size == 0:
        raise LedgerUnavailable("zero_bytes", path, "the file is empty (0 bytes)")
    if not header.startswith(SQLITE_MAGIC):
        raise LedgerUnavailable("not_sqlite", path, "the file is not a SQLite database")
    if len(header) < HEADER_SIZE:
        raise LedgerUnavailable("truncated", path, "the file is cut off inside its header")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    page_count = struct.unpack(">I", header[28:32])[0]
    change_counter, valid_for = header[24:28], header[92:96]
    if not live and change_counter == valid_for and page_count and size < page_count * page_size:
        raise LedgerUnavailable(
            "truncated", path, f"the file is truncated ({size} of {page_count * page_size} bytes)"
        )


def inspect_file(path: Path) -> FileState:
    """Stat a database file and validate its header without opening it through SQLite."""
    path = Path(path)
    try:
        stat = os.stat(path)
        with open(path, "rb") as handle:
            header = handle.read(HEADER_SIZE)
    except FileNotFoundError as error:
        raise LedgerUnavailable("missing", path, "the file does not exist") from error
    except PermissionError as error:
        raise LedgerUnavailable("unreadable", path, "permission denied") from error
    except IsADirectoryError as error:
        raise LedgerUnavailable("not_sqlite", path, "a directory, not a file") from error
    if path.suffix == ".gz":
        return FileState(path, stat.st_size, stat.st_mtime_ns, False, None, None, False)
    wal = _stat_or_none(Path(f"{path}-wal"))
    live = bool(wal and wal.st_size)
    if not live and _changed_since(path, stat):
        # Nothing but a copy grows a file with no WAL beside it (spec §4.7: Capsem writes
        # through its WAL); read it once it holds still.
        raise LedgerUnavailable("copying", path, "copy in progress: the file grew while read")
    _check_header(path, header, stat.st_size, live=live)
    return FileState(
        path=path,
        size=stat.st_size,
        mtime_ns=stat.st_mtime_ns,
        wal_mode=header[18] == 2 and header[19] == 2,
        wal_size=wal.st_size if wal else None,
        wal_mtime_ns=wal.st_mtime_ns if wal else None,
        shm_exists=os.path.exists(f"{path}-shm"),
    )


def _cache_folder(state: FileState, cache_dir: Path, kind: str) -> Path:
    """`<cache>/<kind>/<source>/<version>/`: one folder per source file, holding only the
    copy of its current version (older versions are removed when a new one is made)."""
    source = hashlib.sha256(str(state.path).encode()).hexdigest()[:24]
    version = hashlib.sha256(repr(state.fingerprint).encode()).hexdigest()[:16]
    return cache_dir / kind / source / version


def _prune_versions(folder: Path) -> None:
    for sibling in folder.parent.iterdir():
        if sibling != folder:
            shutil.rmtree(sibling, ignore_errors=True)


def _atomic_copy(write, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".partial-")
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _copy_limited(source, out, path: Path) -> None:
    copied = 0
    while chunk := source.read(1 << 20):
        copied += len(chunk)
        if copied > MAX_DECOMPRESSED_BYTES:
            raise LedgerUnavailable(
                "too_large", path, f"decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes"
            )
        out.write(chunk)


def _decompressed_copy(state: FileState, cache_dir: Path) -> Path:
    folder = _cache_folder(state, cache_dir, "gz")
    target = folder / "session.db"
    if not target.exists():

        def write(out):
            try:
                with gzip.open(state.path, "rb") as source:
                    _copy_limited(source, out, state.path)
            except (OSError, EOFError) as error:
                raise LedgerUnavailable("truncated", state.path, f"gzip: {error}") from error

        _atomic_copy(write, target)
        _prune_versions(folder)
        with open(target, "rb") as handle:
            _check_header(state.path, handle.read(HEADER_SIZE), target.stat().st_size)
    return target


def _snapshot_copy(state: FileState, cache_dir: Path) -> Path:
    folder = _cache_folder(state, cache_dir, "snapshots")
    target = folder / "session.db"
    if not target.exists():
        with open(f"{state.path}-wal", "rb") as wal:
            wal_bytes = wal.read()
        _atomic_copy(lambda out: out.write(wal_bytes), Path(f"{target}-wal"))

        def write_db(out):
            with open(state.path, "rb") as source:
                shutil.copyfileobj(source, out)

        _atomic_copy(write_db, target)
        _prune_versions(folder)
    return target


def cached_stand_in(state: FileState, cache_dir: Path) -> Path:
    """The plugin's own copy of a file that cannot be opened in place (gz, WAL without shm)."""
    try:
        if state.mode == "gz":
            return _decompressed_copy(state, cache_dir)
        return _snapshot_copy(state, cache_dir)
    except LedgerUnavailable:
        raise
    except OSError as error:  # the source changed under us, or the cache is unwritable
        raise LedgerUnavailable("unreadable", state.path, f"cannot copy it: {error}") from error


def sqlite_uri(state: FileState, cache_dir: Path) -> str:
    """The URI that reads ``state.path`` (or its cached stand-in) without touching it."""
    mode = state.mode
    if mode in ("gz", "snapshot"):
        flag = "immutable=1" if mode == "gz" else "mode=ro"
        return f"file:{quote(str(cached_stand_in(state, cache_dir)))}?{flag}"
    flag = "immutable=1" if mode == "immutable" else "mode=ro"
    return f"file:{quote(str(state.path))}?{flag}"


def decode_text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _undecodable(error: sqlite3.Error) -> bool:
    """Python's sqlite3 could not decode a TEXT value as UTF-8 (its own C decoder, strict)."""
    return isinstance(error, sqlite3.OperationalError) and "decode to UTF-8" in str(error)


def tolerant(conn: sqlite3.Connection, read: Callable[[], T]) -> T:
    """`read()` (a pure read of `conn`, safe to run twice) with TEXT decoded by sqlite3's C
    decoder, and again with `decode_text` if a value is not valid UTF-8.

    `decode_text`, the connection's text factory, is a Python call per TEXT value (half a
    million per 1,000 sessions in an index build); valid UTF-8, nearly every value, decodes
    the same either way. A hostile value fails the C decoder and the read runs again with the
    replacing one, so the caller sees exactly what `decode_text` alone gives."""
    if conn.text_factory is not decode_text:
        return read()
    conn.text_factory = str
    try:
        return read()
    except sqlite3.OperationalError as error:
        if not _undecodable(error):
            raise
    finally:
        conn.text_factory = decode_text
    return read()


def connect(state: FileState, cache_dir: Path) -> sqlite3.Connection:
    """Open a read-only connection; a file SQLite rejects raises LedgerUnavailable."""
    try:
        conn = sqlite3.connect(sqlite_uri(state, cache_dir), uri=True, check_same_thread=False)
        # Agents write invalid UTF-8 into TEXT columns; one such cell must not fail a read.
        conn.text_factory = decode_text
        conn.execute("PRAGMA query_only = ON")
        # Up to 32 ledgers x one connection per SQL thread stay open; the OS page cache
        # already holds hot pages, so a small per-connection cache bounds memory.
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as error:
        kind = "unreadable" if "unable to open" in str(error) else "truncated"
        raise LedgerUnavailable(kind, state.path, f"SQLite cannot read it: {error}") from error
    return conn


def settled(
    path: Path,
    read: Callable[[], T],
    failed: Callable[[T], bool] = lambda _: False,
    known: Callable[[], tuple] | None = None,
) -> T:
    """`read()`, tried again at once when it failed (raised LedgerUnavailable or a SQLite
    error, or returned what `failed` calls a failure) while the file or its WAL changed:
    its `file_fingerprint` now differs from the one before the try (`known()` when the caller
    already holds it, as a mounted file does: no stat on the way that succeeds).

    A writer that finishes checkpoints its WAL into the file and removes it: a reader caught
    between those steps sees a file that "grew while read" or a WAL that vanished while it was
    copied. That is a moment, not the file's state; what a file that holds still gives
    (a copy still growing, a truncated file) is reported after the last try."""
    for attempt in range(1, SETTLE_TRIES + 1):
        before = known() if known else file_fingerprint(path)
        try:
            result = read()
        except (LedgerUnavailable, sqlite3.DatabaseError):
            if attempt == SETTLE_TRIES or file_fingerprint(path) == before:
                raise
            continue
        if attempt == SETTLE_TRIES or not failed(result) or file_fingerprint(path) == before:
            return result
    raise AssertionError("unreachable: the last try returns or raises")


def read_ahead(path: Path | None) -> None:
    """Ask the kernel to start reading a file into its page cache now (`posix_fadvise`
    WILLNEED, asynchronous: nothing waits, nothing is written). SQLite reads a ledger a page at
    a time in b-tree order: on a disk that is not in the page cache (a home larger than the
    memory, or one read long ago) each page is a random read of its own, about 1.5 ms on the
    project's machine, so a 470 KB ledger waited ~150 ms for ~12 ms of work. Asked a few
    ledgers before they are opened (`index/parallel.run_ahead`), the file arrives
    in a few large reads while the ledgers before it are worked on. Best effort: a file that
    cannot be opened, or a system without the call, is simply not read ahead."""
    if path is None or not hasattr(os, "posix_fadvise"):
        return
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def open_once(path: Path, cache_dir: Path) -> sqlite3.Connection:
    """Inspect and open in one step, once: for a caller that tries its whole read again
    (`settled`) when the file changed under it."""
    return connect(inspect_file(path), cache_dir)


def open_readonly(path: Path, cache_dir: Path) -> sqlite3.Connection:
    """Inspect and open in one step, for code that reads a file once (CLI, indexer); tried
    again when a writer changed the file meanwhile (`settled`)."""
    return settled(path, lambda: open_once(path, cache_dir))
