"""One era vocabulary (ledger/eras.py): reading and the generator name eras alike, and no
module keeps a second list of them."""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path

import pytest

import datasette_capsem
from datasette_capsem.generate import content, era_templates
from datasette_capsem.ledger import eras
from datasette_capsem.ledger.schema import read_schema

PACKAGE = Path(datasette_capsem.__file__).parent
# The names another vocabulary used before there was one (generate/ had its own).
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
OLD_NAMES = {"v0_9", "v0_10", "march2026", "v1_1", "v1_2", "v1_3", "current"}


def test_the_generator_writes_exactly_the_declared_eras():
    written = {era.name for era in eras.WRITTEN}
    assert set(era_templates.SESSION_ERAS) == written
    assert {name for name in era_templates.ERA_FILES if name in eras.BY_NAME} == written
    for era in eras.WRITTEN:
        assert era_templates.ERA_FILES[era.name] == era.ddl
        if era is not eras.MIGRATED:  # a history: rows of 1.2 then of HEAD (generate/migrated.py)
            assert isinstance(era.traits, eras.Traits), era.name


def test_names_are_unique_and_capsems():
    names = [era.name for era in (*eras.ERAS, eras.MIGRATED)]
    assert len(names) == len(set(names))
    assert not set(names) & OLD_NAMES
    assert eras.era("1.3") is eras.V1_3
    with pytest.raises(KeyError, match="no era 'current'"):
        eras.era("current")
    with pytest.raises(KeyError, match="writes no rows"):
        eras.traits("1.0")


def schema_of(era_name: str):
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(era_templates.template_bytes(era_name))
        return read_schema(conn)
    finally:
        conn.close()


@pytest.mark.parametrize(
    "era", [era for era in eras.WRITTEN if era is not eras.MIGRATED], ids=lambda era: era.name
)
def test_reading_a_written_era_names_it_or_the_older_era_it_cannot_be_told_from(era):
    """A file built from Capsem's DDL of an era reads as that era when the era has a marker,
    else as the next older era that has one (a HEAD file reads as 1.3, a 1.2 file as 1.1)."""
    older = eras.ERAS[eras.ERAS.index(era) :]
    expected = next(e.name for e in older if e.marker is not None)
    assert schema_of(era.name).era == expected
    assert (era.marker is not None) == (expected == era.name)


def test_a_migrated_file_reads_as_its_newest_writer():
    assert schema_of(eras.MIGRATED.name).era == eras.V1_3.name
    assert schema_of(eras.MIGRATED.name).migrated


def test_traits_are_named_not_positional():
    """Each era's traits are keyword fields; the generator reads them from the one list."""
    assert eras.traits(eras.HEAD.name).turn_ids and not eras.traits(eras.V1_2.name).turn_ids
    assert eras.traits(eras.V0_9.name).gemini_ids == "bare"
    assert not hasattr(content, "TRAITS") and not hasattr(content, "EraTraits")


def string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(key) for node in ast.walk(tree) if isinstance(node, ast.Dict) for key in node.keys
    }  # dict keys are field names ("migrated": True), not eras
    skipped |= {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skipped
    }


def test_no_module_but_eras_spells_an_era():
    """An era's name is a string in ledger/eras.py only: any other module takes it from there
    (`eras.HEAD.name`), so a second vocabulary cannot come back unnoticed. Eras named by a
    date are left out: a date is also a date (ledger/rollup.py's cut-offs)."""
    names = {name for name in eras.NAMES if not DATE.match(name)} | OLD_NAMES
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "ledger" / "eras.py":
            continue
        spelled = string_constants(path) & names
        if spelled:
            found[str(path.relative_to(PACKAGE))] = sorted(spelled)
    assert found == {}
