"""Schema eras: the DDL of each era lives in ``schemas/*.sql``; this module turns it into files.

Building DDL costs far more than inserting a few rows, so each era is built once per process
into an empty template and every session file starts as a byte copy of that template.
"""

from __future__ import annotations

import functools
import sqlite3
import tempfile
from importlib import resources
from pathlib import Path

# Era name -> the .sql files applied in order to produce it.
ERA_SCRIPTS: dict[str, tuple[str, ...]] = {
    "current": ("session_current.sql",),
    "march2026": ("session_march2026.sql",),
    "v1_1": ("session_v1_1.sql",),
    "migrated": ("session_v1_1.sql", "session_migrated.sql", "session_current.sql"),
    "main_v7": ("main_v7.sql", "session_current.sql"),
    "main_old": ("main_old.sql", "session_current.sql"),
}

SESSION_ERAS = ("current", "march2026", "v1_1", "migrated")


def read_sql(name: str) -> str:
    """Return one DDL file shipped in ``generate/schemas``."""
    return (
        resources.files(__package__).joinpath("schemas").joinpath(name).read_text(encoding="utf-8")
    )


@functools.cache
def template_bytes(era: str) -> bytes:
    """Bytes of an empty database of ``era`` in rollback-journal mode (WAL is set per file)."""
    with tempfile.TemporaryDirectory(prefix="capsem-template-") as tmp:
        path = Path(tmp) / "template.db"
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            conn.executescript("".join(read_sql(script) for script in ERA_SCRIPTS[era]))
        finally:
            conn.close()
        return path.read_bytes()


@functools.cache
def table_columns(era: str) -> dict[str, tuple[str, ...]]:
    """Column names per table of ``era``, in file order, read back from the template."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(template_bytes(era))
        names = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name != 'sqlite_sequence'"
            )
        ]
        return {
            name: tuple(col[1] for col in conn.execute(f"PRAGMA table_info({name})"))
            for name in names
        }
    finally:
        conn.close()


def create_db(path: Path, era: str) -> None:
    """Write an empty database of ``era`` at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(template_bytes(era))
