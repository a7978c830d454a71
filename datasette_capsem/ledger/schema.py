"""Schema introspection and era detection for session.db and main.db files.

session.db carries no version marker (spec §4.1) and its shape drifted many times (§4.5), so
every consumer asks a LedgerSchema what a file can answer instead of assuming a shape.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from datasette_capsem.ledger import eras
from datasette_capsem.ledger.tables import NAMES, TABLES
from datasette_capsem.sqlfiles import load_sql

# Every ledger table of any era (spec §4.2, §4.5), from the registry (ledger/tables.py). Code
# that names a table in SQL takes it from here or from introspection, never from a request.
LEDGER_TABLES: tuple[str, ...] = NAMES

# Tables a current writer never creates; their presence marks a migrated or legacy file.
LEGACY_TABLES = (
    *(table.name for table in TABLES if table.legacy),
    "session_identity",
    "policy_hook_events",
)
LEGACY_PREFIXES = ("ai_", "security_event", "detection_")


@dataclass(frozen=True)
class LedgerSchema:
    """Tables and their columns, as found in one file."""

    tables: dict[str, tuple[str, ...]]

    def has(self, table: str, *columns: str) -> bool:
        """True when `table` exists with every one of `columns`."""
        found = self.tables.get(table)
        return found is not None and all(column in found for column in columns)

    def has_all(self, requirements: dict[str, list[str] | tuple[str, ...]]) -> bool:
        return all(self.has(table, *columns) for table, columns in requirements.items())

    def missing(self, requirements: dict[str, list[str] | tuple[str, ...]]) -> list[str]:
        """What a query or check needs that this file lacks, as `table` or `table.column`."""
        absent = []
        for table, columns in requirements.items():
            if table not in self.tables:
                absent.append(table)
                continue
            absent += [f"{table}.{c}" for c in columns if c not in self.tables[table]]
        return absent

    @property
    def era(self) -> str:
        """Capsem's name of the newest era whose marker this file has (ledger/eras.py)."""
        for era in eras.ERAS:
            if era.marker is not None and self.has(era.marker[0], *era.marker[1]):
                return era.name
        return eras.UNKNOWN

    @property
    def legacy_tables(self) -> list[str]:
        return sorted(
            name
            for name in self.tables
            if name in LEGACY_TABLES or name.startswith(LEGACY_PREFIXES)
        )

    @property
    def migrated(self) -> bool:
        """A file a newer writer re-opened: current columns beside leftover tables."""
        return self.has("tool_calls", "turn_id") and bool(self.legacy_tables)

    def summary(self) -> dict:
        return {
            "era": self.era,
            "migrated": self.migrated,
            "legacy_tables": self.legacy_tables,
            "tables": sorted(self.tables),
        }


def read_schema(conn: sqlite3.Connection) -> LedgerSchema:
    """Introspect a connection (works as a Datasette `execute_fn` callback)."""
    tables: dict[str, list[str]] = {}
    for table, column in conn.execute(load_sql(__package__, "columns")):
        tables.setdefault(table, []).append(column)
    return LedgerSchema({name: tuple(columns) for name, columns in tables.items()})
