"""One SQL renderer (ledger/dialect.render_sql) and one placeholder syntax: every `.sql` file of
the package uses only its markers, and no module builds SQL text with f-strings or str.format."""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path

import pytest

import datasette_capsem
from datasette_capsem.ledger.dialect import MARKER_RE, render_sql
from datasette_capsem.ledger.schema import read_schema

PACKAGE = Path(datasette_capsem.__file__).parent
# Capsem's own DDL, copied verbatim (generate/schemas/README): not our templates.
CAPSEM_DDL = PACKAGE / "generate" / "schemas"
# Placeholder styles the package used before there was one renderer.
OTHER_STYLES = re.compile(r"__[A-Z]+__|/\*\s*[A-Z]+\s*\*/|/\*\s*parts\s*\*/|%\(\w+\)s|\{\{|\}\}")
SQL_WORDS = re.compile(r"\b(SELECT|FROM|JOIN|WHERE|UNION|INSERT|UPDATE|DELETE|GROUP BY|ORDER BY)\b")


def package_sql_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.sql") if CAPSEM_DDL not in p.parents)


def test_every_sql_file_uses_only_the_renderers_markers():
    wrong = {}
    for path in package_sql_files():
        text = path.read_text(encoding="utf-8")
        found = OTHER_STYLES.findall(text)
        # What is left in braces once the renderer's markers are taken out is another style.
        found += re.findall(r"\{[^}]*\}?", MARKER_RE.sub("", text))
        if found:
            wrong[str(path.relative_to(PACKAGE))] = found
    assert wrong == {}
    assert len(package_sql_files()) > 100  # the walk found the package's files


def _is_sql_text(node: ast.JoinedStr) -> bool:
    text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return bool(SQL_WORDS.search(text)) and any(
        isinstance(v, ast.FormattedValue) for v in node.values
    )


def test_no_module_builds_sql_with_f_strings_or_format():
    """SQL text is a template the renderer fills: an f-string holding SQL words and an
    interpolation, or `.format`/`.format_map`/`.replace` applied to loaded SQL, is another
    renderer."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE / "generate":  # the generator writes Capsem's own files
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr) and _is_sql_text(node):
                found.append(f"{where}:{node.lineno} f-string SQL")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("format", "format_map", "replace")
                and isinstance(node.func.value, ast.Call)
                and getattr(node.func.value.func, "id", getattr(node.func.value.func, "attr", ""))
                == "load_sql"
            ):
                found.append(f"{where}:{node.lineno} .{node.func.attr} on load_sql")
    assert found == []


def _schema(ddl: str):
    conn = sqlite3.connect(":memory:")
    conn.executescript(ddl)
    return read_schema(conn)


def test_the_renderer_fills_every_marker_and_refuses_an_unknown_one():
    schema = _schema("CREATE TABLE tool_calls (id INTEGER, trace_id TEXT);")
    sql = "SELECT {opt:t.trace_id}, {opt:t.turn_id}, {opt:trace_id}, {column} FROM {table} AS t"
    assert render_sql(
        sql, schema, aliases={"t": "tool_calls"}, table="tool_calls", alias="t", column="id"
    ) == ('SELECT t."trace_id", NULL, t."trace_id", "id" FROM "tool_calls" AS t')
    assert render_sql("WHERE t.{key} = :{key}", key="turn_id") == "WHERE t.turn_id = :turn_id"
    assert render_sql("SELECT 1{where}", fragments={"where": " WHERE x = ?"}).endswith("= ?")
    with pytest.raises(ValueError, match="nothing given"):
        render_sql("SELECT * FROM {table}")
    with pytest.raises(ValueError, match="not an identifier"):
        render_sql("SELECT {key}", key="a; DROP TABLE x")
    with pytest.raises(ValueError, match="no table declared"):
        render_sql("SELECT {opt:x.y}", schema)
    # A hostile table name is quoted as one identifier, never run as SQL.
    assert render_sql("SELECT * FROM {table}", table='x" ; --') == 'SELECT * FROM "x"" ; --"'
