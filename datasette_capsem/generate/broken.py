"""Session files a reader must survive (findings.BROKEN_FILE_KINDS)."""

from __future__ import annotations

import os
from pathlib import Path

from datasette_capsem.generate.content import Builder
from datasette_capsem.generate.rows import Ledger, write_ledger
from datasette_capsem.generate.wal import append_uncheckpointed
from datasette_capsem.ledger import eras

NOT_SQLITE = b"PK\x03\x04 this is a zip archive, not a SQLite database\n" * 64


def write_broken(path: Path, kind: str, b: Builder) -> None:
    """Write ``path`` as the broken file ``kind``, starting from the valid rows in ``b``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "zero_bytes":
        path.write_bytes(b"")
    elif kind == "not_sqlite":
        path.write_bytes(NOT_SQLITE)
    elif kind == "truncated":
        write_ledger(path, eras.HEAD.name, b.ledger)
        data = path.read_bytes()
        path.write_bytes(data[: 4096 * 5 + 1234])  # header promises more pages than exist
    elif kind == "unreadable":
        write_ledger(path, eras.HEAD.name, b.ledger)
        os.chmod(path, 0)  # root still reads it; the manifest records the intent
    elif kind == "wal_without_shm":
        head, tail = split(b.ledger)
        write_ledger(path, eras.HEAD.name, head)
        append_uncheckpointed(path, eras.HEAD.name, tail)
        Path(f"{path}-shm").unlink()
    else:
        raise ValueError(f"unknown broken file kind {kind!r}")


def split(ledger: Ledger, keep: float = 2 / 3) -> tuple[Ledger, Ledger]:
    """First ``keep`` of every table's rows, and the rest (for a WAL tail)."""
    head, tail = Ledger(), Ledger()
    for table, rows in ledger.rows.items():
        cut = int(len(rows) * keep)
        head.rows[table] = rows[:cut]
        tail.rows[table] = rows[cut:]
    return head, tail
