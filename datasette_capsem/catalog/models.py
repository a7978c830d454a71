"""What the catalog knows about one session."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from datasette_capsem.ledger.times import parse_time
from datasette_capsem.memory import CompactRow, is_packed, unpack_row

# Where a session's directory sits (spec §1).
KINDS = ("ephemeral", "persistent", "failed", "run", "legacy", "legacy_gz", "index_only")

# main.db statuses written once a session's writer is gone (spec §3.4): a clean stop or a
# non-zero exit caught by the child watcher (capsem-service main.rs:1789-1800), or archived since.
ENDED_STATUSES = frozenset({"stopped", "crashed", "vacuumed", "terminated"})
# A resumed persistent VM keeps its old `stopped` row (resume does not touch main.db, spec §3.4):
# its new writer shows as a WAL written after the recorded stop, past this much clock slack.
RESUME_AFTER_STOP_SECONDS = 60.0
# A ledger's file names in its session dir (discover.ledger_in): one string each, shared.
LEDGER_NAMES = {name: name for name in ("session.db", "session.db.gz")}
# A session's stopped time is its main.db row's (`Session.stopped_at`); never a time itself.
STOPPED_IN_ROW = "(main.db's stopped_at)"


class MainRow(CompactRow):
    """One main.db `sessions` row as a read-only mapping (a machine can have tens of
    thousands: a tuple each, with one column index per read)."""

    __slots__ = ()


@dataclass(slots=True, init=False)
class Session:
    """One session: the union of its main.db row, its directory and its registry entry.

    A home of 100,000 sessions keeps one per session, so what each holds is small: its
    ledger and directory as strings (`ledger_path` and `dir_path` make a Path on access; a
    ledger in its own directory is its file name, one shared string), no problems list
    unless it has one. A vacuumed session (a main.db row, no directory) holds no path."""

    id: str
    kind: str
    name: str | None
    status: str | None
    created_at: str | None
    # The stopped time, or STOPPED_IN_ROW: main.db's row's (`stopped_at` reads it there; a
    # string per session otherwise, 7 MB at 100,000, for a value only a shown row reads)
    _stopped: str | None
    _ledger: str | None  # session.db or session.db.gz: its name in _dir, else a whole path
    _dir: str | None
    # main.db's row: packed (memory.RowPacker, a quarter of its size as a tuple) and kept in
    # a file of the cache dir (memory.RowFile: its place there, an int) as the catalog read
    # it, or a mapping as given; `main_row` is the row, read and unpacked on each access
    _main: int | bytes | MainRow | None
    registry_entry: dict[str, Any] | None  # what is read of it (discover.REGISTRY_FIELDS)
    # The mtime of a non-empty -wal beside the ledger, 0.0 when there is none (discover.writer_wal)
    writer_wal: float
    same_vm_as: str | None  # the other id of a persistent VM known under two ids
    problems: list[str] | tuple[()]  # () when none: an empty list per session costs 5 MB
    # In an instance of labelled homes `id` is the address `<label>--<id>` (config.qualify),
    # unique across homes; `home` is the label and `local_id` the id Capsem gave it there.
    home: str
    local_id: str | None
    # index/verdicts.row_signature's last answer and whether the session was live then (an
    # int). Forgotten when the row is set and in a copy (its status may differ); the row and
    # status are not changed after the catalog's scan, liveness is part of the number.
    signature: int | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        id: str,
        kind: str,
        name: str | None = None,
        status: str | None = None,
        created_at: str | None = None,
        stopped_at: str | None = None,
        ledger_path: Path | str | None = None,
        dir_path: Path | str | None = None,
        main_row: MainRow | None = None,
        registry_entry: dict[str, Any] | None = None,
        writer_wal: float = 0.0,
        same_vm_as: str | None = None,
        problems: list[str] | None = None,
        home: str = "",
        local_id: str | None = None,
        *,
        _ledger: str | None = None,  # as stored, for dataclasses.replace
        _dir: str | None = None,
        _main: int | bytes | MainRow | None = None,
        _stopped: str | None = None,
        signature: int | None = None,  # dataclasses.replace passes it: not kept
    ):
        self.id, self.kind, self.name, self.status = id, kind, name, status
        self.created_at, self._stopped = created_at, stopped_at if _stopped is None else _stopped
        self._dir = self._ledger = None
        self.dir_path = dir_path if _dir is None else _dir
        self.ledger_path = ledger_path
        if _ledger is not None:
            self._ledger = _ledger
        self._main = main_row if _main is None else _main
        self.registry_entry = registry_entry
        self.writer_wal, self.same_vm_as = writer_wal, same_vm_as
        self.problems = problems or ()
        self.home, self.local_id = home, local_id
        self.signature = None

    @property
    def main_row(self) -> MainRow | None:
        """main.db's row of this session (unpacked anew on each access: a caller that reads
        it several times keeps it)."""
        row = self._main
        return unpack_row(row) if is_packed(row) else row

    @main_row.setter
    def main_row(self, value: int | bytes | MainRow | None) -> None:
        self._main = value
        self.signature = None

    @property
    def stopped_at(self) -> str | None:
        stopped = self._stopped
        if stopped is not None and stopped == STOPPED_IN_ROW:
            row = self.main_row
            return row.get("stopped_at") if row is not None else None
        return stopped

    @stopped_at.setter
    def stopped_at(self, value: str | None) -> None:
        self._stopped = value

    @property
    def in_main_db(self) -> bool:
        return self._main is not None

    def __getstate__(self):
        # A packed row is this process's (its packer's tables): another gets it unpacked.
        return [self.main_row if slot == "_main" else getattr(self, slot) for slot in SLOTS]

    def __setstate__(self, state) -> None:
        for slot, value in zip(SLOTS, state, strict=True):
            object.__setattr__(self, slot, value)

    @property
    def dir_path(self) -> Path | None:
        return None if self._dir is None else Path(self._dir)

    @dir_path.setter
    def dir_path(self, value: Path | str | None) -> None:
        if self._ledger in LEDGER_NAMES and self._dir is not None:  # a name in the old dir
            self._ledger = os.path.join(self._dir, self._ledger)
        self._dir = None if value is None else _as_path_string(value)

    @property
    def ledger_path(self) -> Path | None:
        """session.db or session.db.gz (a Path made on each access)."""
        ledger = self._ledger
        if ledger is None:
            return None
        if self._dir is not None and ledger in LEDGER_NAMES:
            return Path(self._dir, ledger)
        return Path(ledger)

    @ledger_path.setter
    def ledger_path(self, value: Path | str | None) -> None:
        if value is None:
            self._ledger = None
            return
        path = _as_path_string(value)
        folder, name = os.path.split(path)
        in_dir = self._dir is not None and folder == self._dir and name in LEDGER_NAMES
        self._ledger = LEDGER_NAMES[name] if in_dir else path

    @property
    def dir_location(self) -> str | None:
        """The session's directory as the string it holds (no `Path` made)."""
        return self._dir

    @property
    def ledger_location(self) -> str | None:
        """`str(ledger_path)`, made without a `Path` (the index's watch and refresh ask for
        every ledger's, every round)."""
        ledger = self._ledger
        if ledger is None:
            return None
        if self._dir is not None and ledger in LEDGER_NAMES:
            return ledger if self._dir == "." else os.path.join(self._dir, ledger)
        return ledger

    @property
    def short_id(self) -> str:
        """The id as Capsem wrote it (the address without its home label)."""
        return self.local_id or self.id

    @property
    def has_ledger(self) -> bool:
        return self._ledger is not None

    @property
    def writer_ended(self) -> bool:
        """Capsem says this session's writer is gone (spec §4.7): the service renamed its
        directory `<id>-failed-<stamp>` (capsem-service main.rs:1289-1300), or main.db records
        its stop or crash and no writer wrote the ledger since. A killed writer leaves a
        non-empty WAL (it truncates only at a clean shutdown, writer.rs:805-812): its rows are
        real and read, but nobody adds to them."""
        if self.kind == "failed":
            return True
        if self.status not in ENDED_STATUSES:
            return False
        if self.kind != "persistent" or not self.writer_wal:
            return True
        stopped = parse_time(self.stopped_at)
        return stopped is not None and (
            self.writer_wal <= stopped.timestamp() + RESUME_AFTER_STOP_SECONDS
        )

    @property
    def live(self) -> bool:
        """A writer may still add rows: a non-empty -wal or main.db says running, and Capsem
        does not say the writer ended (spec §4.7)."""
        return not self.writer_ended and (bool(self.writer_wal) or self.status == "running")

    @property
    def display_name(self) -> str | None:
        """A name only when it says more than the id does."""
        return self.name if self.name and self.name != self.id else None

    def summary(self) -> dict[str, Any]:
        """The JSON shape every page and command uses for a session."""
        return {
            "id": self.id,
            "name": self.display_name,
            "kind": self.kind,
            "status": self.status,
            "created_at": self.created_at,
            "stopped_at": self.stopped_at,
            "has_ledger": self.has_ledger,
            "live": self.live,
            "in_main_db": self._main is not None,
            "same_vm_as": self.same_vm_as,
            "problems": list(self.problems),
            **({"home": self.home, "local_id": self.short_id} if self.home else {}),
        }


SLOTS = tuple(Session.__slots__)


def _as_path_string(value: Path | str) -> str:
    """A path as `str(Path(value))` (normalised as a `Path` is: what `ledger_location`
    joins equals what `ledger_path` makes); a `Path`'s own string, not a copy."""
    return os.fspath(value if isinstance(value, PurePath) else PurePath(value))
