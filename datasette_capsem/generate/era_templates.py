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

from datasette_capsem.ledger import eras

# Era name -> Capsem's DDL for it, copied verbatim from capsem-ddl/ (the ground truth, spec
# §4.5). Every session era is one file: CREATE_SCHEMA then migrate() as Capsem ran them. The
# eras and their files are declared in ledger/eras.py; main.db's two shapes are named here.
MAIN_V7 = "main_v7"  # main.db at HEAD (no total_mcp_calls)
MAIN_OLD = "main_old"  # same, sessions as created before 06-24 (below)
ERA_FILES: dict[str, str] = {
    **{era.name: era.ddl for era in eras.WRITTEN if era.ddl},
    MAIN_V7: "main_head_2026-08-22.sql",
    MAIN_OLD: "main_head_2026-08-22.sql",
}
MAIN_OLD_SESSIONS = "main_old_sessions.sql"
USER_VERSION = {MAIN_V7: 7, MAIN_OLD: 7}

SESSION_ERAS = tuple(era.name for era in eras.WRITTEN)


def read_sql(name: str) -> str:
    """Return one DDL file shipped in ``generate/schemas``."""
    return (
        resources.files(__package__).joinpath("schemas").joinpath(name).read_text(encoding="utf-8")
    )


def era_sql(era: str) -> str:
    """The whole script that builds an empty database of ``era``."""
    sql = read_sql(ERA_FILES[era])
    if era == MAIN_OLD:
        start = sql.index("CREATE TABLE sessions (")
        end = sql.index(");", start) + 2
        sql = sql[:start] + read_sql(MAIN_OLD_SESSIONS) + sql[end:]
    if era in USER_VERSION:
        sql += f"\nPRAGMA user_version = {USER_VERSION[era]};\n"
    return sql


@functools.cache
def template_bytes(era: str) -> bytes:
    """Bytes of an empty database of ``era`` in rollback-journal mode (WAL is set per file)."""
    with tempfile.TemporaryDirectory(prefix="capsem-template-") as tmp:
        path = Path(tmp) / "template.db"
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=OFF")
            # A scratch file: one fsync per CREATE statement made this most of a generated
            # home's wall time on a busy disk, for bytes that are the same without them.
            conn.execute("PRAGMA synchronous=OFF")
            conn.executescript(era_sql(era))
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
