"""What the catalog knows about one session."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Where a session's directory sits (spec §1).
KINDS = ("ephemeral", "persistent", "failed", "run", "legacy", "legacy_gz", "index_only")


class MainRow(Mapping[str, Any]):
    """One main.db `sessions` row as a read-only mapping.

    A machine can have tens of thousands of rows; a tuple plus a column index shared by all
    rows of one read costs a fraction of a dict per row.
    """

    __slots__ = ("_columns", "_values")

    def __init__(self, columns: dict[str, int], values: tuple[Any, ...]):
        self._columns = columns
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[self._columns[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    def __eq__(self, other: object) -> bool:
        # Two reads of one row compare by their tuples: a rescan compares 10,000 rows, and
        # Mapping's own __eq__ builds two dicts per row.
        if isinstance(other, MainRow):
            return self._values == other._values and (
                self._columns is other._columns or self._columns == other._columns
            )
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # a mapping, mutable in spirit like dict

    def __repr__(self) -> str:
        return f"MainRow({dict(self)!r})"


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
    registry_entry: dict[str, Any] | None = None
    writer_wal: bool = False  # a non-empty -wal beside the ledger (discover.writer_wal)
    same_vm_as: str | None = None  # the other id of a persistent VM known under two ids
    problems: list[str] = field(default_factory=list)
    # In an instance of labelled homes `id` is the address `<label>--<id>` (config.qualify),
    # unique across homes; `home` is the label and `local_id` the id Capsem gave it there.
    home: str = ""
    local_id: str | None = None

    @property
    def short_id(self) -> str:
        """The id as Capsem wrote it (the address without its home label)."""
        return self.local_id or self.id

    @property
    def has_ledger(self) -> bool:
        return self.ledger_path is not None

    @property
    def live(self) -> bool:
        """A writer may still add rows: a non-empty -wal, or main.db says running (spec §4.7)."""
        return self.writer_wal or self.status == "running"

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
