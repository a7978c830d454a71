"""Generated ledgers have exactly Capsem's DDL, era by era.

Ground truth is ``tests/capsem_ddl/`` (Capsem's schema.rs applied per era, see its
README). Each file is loaded into an empty in-memory SQLite and compared with every generated
ledger of the matching era: tables, columns (PRAGMA table_xinfo: name, type, NOT NULL, default,
pk, in order), the CREATE TABLE text (CHECK and UNIQUE constraints, whitespace-normalised),
indexes (name, unique flag, origin, columns) and triggers. Nothing here uses the generator's
schema helpers: the generator only provides the files, through ``generate_home``.
"""

from __future__ import annotations

import gzip
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import sessions_in

DDL_DIR = Path(__file__).resolve().parent / "capsem_ddl"  # Capsem's DDL, in the repository
MAIN_DB = "sessions/main.db"

# DDL file -> the generator's era (manifest "era"), or main.db.
FILE_ERA = {
    "session_0x_2026-03-01.sql": "0.9",
    "session_0x_2026-03-13.sql": "2026-03-13",
    "session_0.16_2026-04-02.sql": "0.16",
    "session_1.1_2026-05-11.sql": "1.1",
    "session_1.2_2026-05-24.sql": "1.2",
    "session_1.3_2026-06-27.sql": "1.3",
    "session_head_2026-08-22.sql": "head",
    "session_migrated_1.2-1.3-head.sql": "migrated",
    "main_head_2026-08-22.sql": MAIN_DB,
}


def ddl_files() -> list[str]:
    return sorted(p.name for p in DDL_DIR.glob("*.sql"))


def normalise(sql: str | None) -> str | None:
    if sql is None:
        return None
    sql = re.sub(r"\s+", " ", sql).strip()
    return re.sub(r"\s*([(),])\s*", r"\1", sql)


def shape(conn: sqlite3.Connection) -> dict:
    """Everything about a schema that a reader or a CHECK can observe."""
    master = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
        "ORDER BY type, name"
    ).fetchall()
    tables = sorted(name for kind, name, _t, _s in master if kind == "table")
    columns = {
        t: [(r[1], r[2], r[3], r[4], r[5], r[6]) for r in conn.execute(f"PRAGMA table_xinfo({t})")]
        for t in tables
    }
    create = {name: normalise(sql) for kind, name, _t, sql in master if kind == "table"}
    indexes = set()
    for t in tables:
        for _seq, name, unique, origin, partial in conn.execute(f"PRAGMA index_list({t})"):
            cols = tuple(r[2] for r in conn.execute(f"PRAGMA index_info('{name}')"))
            auto = name.startswith("sqlite_autoindex_")
            indexes.add((t, "<auto>" if auto else name, unique, origin, partial, cols))
    index_sql = {name: normalise(sql) for kind, name, _t, sql in master if kind == "index"}
    triggers = {name: normalise(sql) for kind, name, _t, sql in master if kind == "trigger"}
    views = {name: normalise(sql) for kind, name, _t, sql in master if kind == "view"}
    return {
        "tables": tables,
        "columns": columns,
        "create": create,
        "indexes": indexes,
        "index_sql": index_sql,
        "triggers": triggers,
        "views": views,
    }


def expected_shape(filename: str) -> dict:
    conn = sqlite3.connect(":memory:")
    conn.executescript((DDL_DIR / filename).read_text(encoding="utf-8"))
    return shape(conn)


def open_private(home: Path, rel: str, tmp: Path) -> sqlite3.Connection:
    """A private copy of a generated file (reads never touch the shared home)."""
    src = home / rel
    tmp.mkdir(parents=True, exist_ok=True)
    dest = tmp / rel.replace("/", "_")
    if src.suffix == ".gz":
        dest = dest.with_suffix("")
        dest.write_bytes(gzip.decompress(src.read_bytes()))
    else:
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{src}{suffix}").exists():
                shutil.copyfile(f"{src}{suffix}", f"{dest}{suffix}")
    return sqlite3.connect(dest)


def generated(manifest: dict, era: str) -> list[str]:
    """Every readable ledger of ``era`` whose schema the generator did not damage on purpose."""
    damaged = {d["session"] for d in manifest["defects"] if d["kind"] == "schema_not_ready"}
    if era == MAIN_DB:
        return [MAIN_DB]
    chosen = sessions_in(
        manifest,
        era=era,
        has=("ledger",),
        lacks=("broken", "alias_of"),
        where=lambda s: s["id"] not in damaged,
    )
    return [s["ledger"] for s in chosen]


def diff(want: dict, got: dict) -> list[str]:
    problems = []
    if want["tables"] != got["tables"]:
        problems.append(
            f"tables: missing {sorted(set(want['tables']) - set(got['tables']))}, "
            f"extra {sorted(set(got['tables']) - set(want['tables']))}"
        )
    for table in set(want["tables"]) & set(got["tables"]):
        if want["columns"][table] != got["columns"][table]:
            problems.append(
                f"{table} columns:\n  want {want['columns'][table]}\n  got  {got['columns'][table]}"
            )
        if want["create"][table] != got["create"][table]:
            problems.append(
                f"{table} CREATE TABLE:\n  want {want['create'][table]}\n  got  {got['create'][table]}"
            )
    if want["indexes"] != got["indexes"]:
        problems.append(
            f"indexes: missing {sorted(want['indexes'] - got['indexes'])}, "
            f"extra {sorted(got['indexes'] - want['indexes'])}"
        )
    for key in ("index_sql", "triggers", "views"):
        if want[key] != got[key]:
            problems.append(f"{key} differ: {sorted(set(want[key]) ^ set(got[key]))}")
    return problems


def test_every_ddl_file_is_mapped() -> None:
    assert ddl_files(), f"no .sql files in {DDL_DIR}"
    assert set(ddl_files()) == set(FILE_ERA), "a DDL era the generator does not map"


@pytest.mark.parametrize("filename", sorted(FILE_ERA))
def test_generated_schema_equals_capsem_ddl(
    filename: str, capsem_home: Path, manifest: dict, clean_home: tuple, tmp_path: Path
) -> None:
    if not (DDL_DIR / filename).exists():
        pytest.fail(f"{filename} is missing from {DDL_DIR}")
    want = expected_shape(filename)
    era = FILE_ERA[filename]
    files = [(capsem_home, rel) for rel in generated(manifest, era)]
    files += [(clean_home[0], rel) for rel in generated(clean_home[1], era)]
    assert files and files[-1][0] == clean_home[0], f"no generated ledger of era {era!r}"
    for home, rel in files:
        conn = open_private(home, rel, tmp_path / home.parent.name)
        problems = diff(want, shape(conn))
        assert not problems, f"{rel} drifts from {filename}:\n" + "\n".join(problems)
        if rel == MAIN_DB:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
        conn.close()


def test_head_counts() -> None:
    """The figures the spec quotes for HEAD: 15 tables and 81 indexes."""
    want = expected_shape("session_head_2026-08-22.sql")
    assert len(want["tables"]) == 15
    assert len(want["index_sql"]) == 81


def test_the_generators_copy_of_the_ddl_is_capsems():
    """The generator ships Capsem's DDL (`generate/schemas/`, a header line added) because the
    installed package has no tests/: both copies say the same, line for line."""
    shipped = Path(__file__).resolve().parents[1] / "datasette_capsem" / "generate" / "schemas"
    for ground in sorted(DDL_DIR.glob("*.sql")):
        copy = (shipped / ground.name).read_text("utf-8").split("\n", 1)
        assert copy[0].startswith("-- datasette-capsem era"), ground.name
        assert copy[1] == ground.read_text("utf-8"), ground.name
