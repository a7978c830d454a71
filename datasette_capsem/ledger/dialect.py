"""The one SQL dialect and renderer for statements built from a file's schema.

Ledgers of different eras have different columns (spec §4.5), so every `.sql` file of the
package is a template with markers in braces, filled by `render_sql` and by nothing else:

* `{opt:alias.column}`: `alias."column"` when the table `aliases[alias]` has the column, else
  `NULL`;
* `{opt:column}`: the same for the statement's own `table` (prefixed by its `alias`, if any);
* `{table}`: the statement's table, quoted; `{column}`: an identifier column, quoted;
* `{key}`: the chain column of a canned query (a plain identifier, written bare so the SQL a
  reader sees stays readable);
* any other `{name}`: a fragment of SQL our own code built (`fragments`), e.g. a fork's
  `{own}` filter, a projection, or a list of `?` placeholders.

Only identifiers from our own metadata and the file's own schema are substituted; values are
always bound parameters. A marker the caller gave nothing for is an error, never left in the
SQL. tests/test_sql_dialect.py keeps other placeholder styles out of the package's `.sql` files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlite_utils.db import quote_identifier

from datasette_capsem.ledger.schema import LedgerSchema

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
MARKER_RE = re.compile(rf"\{{(opt:)?({NAME})(?:\.({NAME}))?\}}")
OPT_RE = re.compile(rf"\{{opt:({NAME})\.({NAME})\}}")
IDENTIFIER_RE = re.compile(rf"^{NAME}$")

__all__ = [
    "MARKER_RE",
    "OPT_RE",
    "optional_column",
    "quote_identifier",
    "render_optional_columns",
    "render_sql",
]


def optional_column(schema: LedgerSchema, table: str, column: str, alias: str | None = None) -> str:
    """`alias."column"` (or `"column"`) when `table` has `column` in this file, else `NULL`."""
    if not schema.has(table, column):
        return "NULL"
    return (f"{alias}." if alias else "") + quote_identifier(column)


def render_sql(
    sql: str,
    schema: LedgerSchema | None = None,
    *,
    aliases: Mapping[str, str] | None = None,
    table: str | None = None,
    alias: str | None = None,
    column: str | None = None,
    key: str | None = None,
    fragments: Mapping[str, str] | None = None,
) -> str:
    """`sql` with every marker filled (see the module docstring); ValueError on one that
    cannot be."""
    aliases = aliases or {}
    fragments = fragments or {}

    def replace(match: re.Match) -> str:
        optional, name, dotted = match.groups()
        if optional:
            if schema is None:
                raise ValueError(f"{match.group(0)} needs the file's schema")
            if dotted is None:
                if table is None:
                    raise ValueError(f"{match.group(0)} needs the statement's table")
                return optional_column(schema, table, name, alias)
            aliased = aliases.get(name)
            if aliased is None:
                raise ValueError(f"{match.group(0)} uses an alias with no table declared")
            return optional_column(schema, aliased, dotted, name)
        if dotted is None:
            if name == "table" and table is not None:
                return quote_identifier(table)
            if name == "column" and column is not None:
                return quote_identifier(column)
            if name == "key" and key is not None:
                if not IDENTIFIER_RE.match(key):
                    raise ValueError(f"{{key}}: {key!r} is not an identifier")
                return key
            if name in fragments:
                return fragments[name]
        raise ValueError(f"{match.group(0)}: nothing given for this marker")

    return MARKER_RE.sub(replace, sql)


def render_optional_columns(sql: str, aliases: Mapping[str, str], schema: LedgerSchema) -> str:
    """Fill only the `{opt:alias.column}` markers (a query's other markers come later)."""

    def replace(match: re.Match) -> str:
        alias, column = match.group(1), match.group(2)
        table = aliases.get(alias)
        if table is None:
            raise ValueError(f"{{opt:{alias}.{column}}} uses an alias with no table declared")
        return optional_column(schema, table, column, alias)

    return OPT_RE.sub(replace, sql)
