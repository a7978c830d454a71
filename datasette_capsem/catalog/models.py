"""What the catalog knows about one session."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasette_capsem.ledger.times import parse_time
from datasette_capsem.memory import CompactRow

# Where a session's directory sits (spec §1).
KINDS = ("ephemeral", "persistent", "failed", "run", "legacy", "legacy_gz", "index_only")

# main.db statuses written once a session's writer is gone (spec §3.4): a clean stop or a
# non-zero exit caught by the child watcher (capsem-service main.rs:1789-1800), or archived since.
ENDED_STATUSES = frozenset({"stopped", "crashed", "vacuumed", "terminated"})
# A resumed persistent VM keeps its old `stopped` row (resume does not touch main.db, spec §3.4):
# its new writer shows as a WAL written after the recorded stop, past this much clock slack.
RESUME_AFTER_STOP_SECONDS = 60.0


class MainRow(CompactRow):
    """One main.db `sessions` row as a read-only mapping (a machine can have tens of
    thousands: a tuple each, with one column index per read)."""

    __slots__ = ()


@dataclass(slots=True)
class Session:
    """One session: the union of its main.db row, its directory and its registry entry."""

    id: str
    kind: str
    name: str | None = None
    status: str | None = None
    created_at: str | None = None
    stopped_at: str | None = None
    ledger_path: Path | None = None  # session.db or session.db.gz
    dir_path: Path | None = None
    main_row: MainRow | None = None
    registry_entry: dict[str, Any] | None = None  # what is read of it (discover.REGISTRY_FIELDS)
    # The mtime of a non-empty -wal beside the ledger, 0.0 when there is none (discover.writer_wal)
    writer_wal: float = 0.0
    same_vm_as: str | None = None  # the other id of a persistent VM known under two ids
    problems: list[str] = field(default_factory=list)
    # In an instance of labelled homes `id` is the address `<label>--<id>` (config.qualify),
    # unique across homes; `home` is the label and `local_id` the id Capsem gave it there.
    home: str = ""
    local_id: str | None = None
    # index/verdicts.row_signature's last answer, with what it was computed from
    signature: tuple | None = field(default=None, compare=False, repr=False)

    @property
    def short_id(self) -> str:
        """The id as Capsem wrote it (the address without its home label)."""
        return self.local_id or self.id

    @property
    def has_ledger(self) -> bool:
        return self.ledger_path is not None

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
            "in_main_db": self.main_row is not None,
            "same_vm_as": self.same_vm_as,
            "problems": list(self.problems),
            **({"home": self.home, "local_id": self.short_id} if self.home else {}),
        }
