"""The one SQL dialect for statements built from a file's schema.

Ledgers of different eras have different columns (spec §4.5), so shared SQL says
`{opt:alias.column}` where a column may be absent: the column when the aliased table has it,
else `NULL`. Only identifiers from our own metadata and the file's own schema are substituted;
values are always bound parameters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlite_utils.db import quote_identifier

from datasette_capsem.ledger.schema import LedgerSchema

OPT_RE = re.compile(r"\{opt:([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\}")

__all__ = ["OPT_RE", "quote_identifier", "render_optional_columns"]


def render_optional_columns(sql: str, aliases: Mapping[str, str], schema: LedgerSchema) -> str:
    """Replace each `{opt:alias.column}` by `alias."column"` if the table has it, else NULL."""

    def replace(match: re.Match) -> str:
        alias, column = match.group(1), match.group(2)
        table = aliases.get(alias)
        if table is None:
            raise ValueError(f"{{opt:{alias}.{column}}} uses an alias with no table declared")
        return f"{alias}.{quote_identifier(column)}" if schema.has(table, column) else "NULL"

    return OPT_RE.sub(replace, sql)
