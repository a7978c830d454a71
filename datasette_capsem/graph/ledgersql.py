"""Run the SQL in `graph/sql/` against a ledger whose shape is known only by introspection.

session.db drifted through a dozen shapes (spec §4.5), so one query text cannot name every
column. The `.sql` files hold the queries; three markers of the one renderer
(`ledger/dialect.py`) are filled here, and only from constants in this package, never from data:

* ``{columns}``: a projection built from column specs; a column the file lacks reads NULL.
* ``{table}``: a ledger table name from `LEDGER_TABLES`, quoted.
* ``{column}``: an identifier column from `ID_COLUMNS` (search) or `model_call_id` (a trace's
  rows, `trace_rows_with.sql`), quoted.

Every value is bound as a parameter. Lists of values travel as one JSON parameter, read back
with ``json_each``, so no query text depends on how many values there are.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from datasette_capsem.ledger.dialect import quote_identifier, render_sql
from datasette_capsem.ledger.schema import LEDGER_TABLES as ALL_LEDGER_TABLES
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.sqlfiles import load_sql

PACKAGE = "datasette_capsem.graph"
PREVIEW_CHARS = 240

# Every table the graph package may name in a query. A name outside this set is refused.
LEDGER_TABLES = frozenset(ALL_LEDGER_TABLES)


# Columns a search may compare with a value.
ID_COLUMNS = frozenset({"trace_id", "turn_id", "event_id", "call_id", "message_id", "ask_id"})
# Columns a statement may name with `{column}`: those, and the one a trace's rows are found by.
KEY_COLUMNS = ID_COLUMNS | {"model_call_id"}


def _column(schema: LedgerSchema, table: str, spec: str) -> str:
    """One projection term: `name`, `name:preview` (first chars, "…" when cut), `name:length` (bytes of a
    blob) or `name:isnull`. The last two read only the record header, not a big value."""
    name, _, mode = spec.partition(":")
    present = schema.has(table, name)
    if mode == "length":
        alias = f"{name}_length"
        return (
            f"length({quote_identifier(name)}) AS {quote_identifier(alias)}"
            if present
            else f"NULL AS {quote_identifier(alias)}"
        )
    if mode == "isnull":
        alias = f"{name}_isnull"
        test = f"typeof({quote_identifier(name)}) = 'null'" if present else "NULL"
        return f"{test} AS {quote_identifier(alias)}"
    if not present:
        return f"NULL AS {quote_identifier(name)}"
    if mode == "preview":  # text cut here says so ("…"): the masker treats a cut text apart
        column = quote_identifier(name)
        head = f"substr({column}, 1, {PREVIEW_CHARS})"
        return (
            f"CASE WHEN typeof({column}) = 'text' AND length({column}) > {PREVIEW_CHARS} "
            f"THEN {head} || '…' ELSE {head} END AS {column}"
        )
    return quote_identifier(name)


def projection(schema: LedgerSchema, table: str, specs: Sequence[str]) -> str:
    return ", ".join(_column(schema, table, spec) for spec in specs)


def query_text(
    name: str,
    *,
    schema: LedgerSchema | None = None,
    table: str | None = None,
    columns: Sequence[str] | None = None,
    file_tables: Sequence[str] = (),
    column: str | None = None,
) -> str:
    """The text of `graph/sql/<name>.sql` with its markers filled.

    `file_tables` widens the allowed table names to those the file's own sqlite_master lists
    (for row counts of legacy tables); they are quoted like every other identifier.
    """
    if table is not None and table not in LEDGER_TABLES and table not in file_tables:
        raise ValueError(f"not a ledger table: {table!r}")
    if column is not None and column not in KEY_COLUMNS:
        raise ValueError(f"not an id column: {column!r}")
    fragments = {}
    if columns is not None:
        if schema is None or table is None:
            raise ValueError("a projection needs the schema and the table")
        fragments["columns"] = projection(schema, table, columns)
    return render_sql(
        load_sql(PACKAGE, name), schema, table=table, column=column, fragments=fragments
    )


def fetch(conn: sqlite3.Connection, sql: str, params: dict[str, Any] | None = None) -> list[dict]:
    """Rows as dicts, whatever row factory the connection uses."""
    cursor = conn.execute(sql, params or {})
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, tuple(row), strict=True)) for row in cursor.fetchall()]


def run(
    conn: sqlite3.Connection,
    name: str,
    params: dict[str, Any] | None = None,
    **markers: Any,
) -> list[dict]:
    return fetch(conn, query_text(name, **markers), params)


def json_list(values: Iterable[Any]) -> str:
    """A list parameter for `json_each` (deduplicated, order kept)."""
    return json.dumps(list(dict.fromkeys(v for v in values if v is not None)))
