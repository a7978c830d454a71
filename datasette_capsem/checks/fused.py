"""A table's simple row checks read in one statement (issue 29: the index build's CPU).

Most SQL checks of the rule book have the shape `SELECT id FROM <table> WHERE <condition>
ORDER BY id` (null, malformed, placeholder or duplicated event ids, unparsable timestamps,
credential refs, turn ids...), each run on every table it lists: about sixty statements for
a ledger of fifteen tables. The checks of one table are read together instead:

    SELECT id, (CASE WHEN (<c0>) THEN 1 ELSE 0 END) | (CASE WHEN (<c1>) THEN 2 ELSE 0 END)
           | ... AS capsem_checks
    FROM <table> ORDER BY id

and each check takes the rows whose bit is set (`CheckContext.answered`). A condition is
true in a CASE exactly when it is in a WHERE (the same truth test), so each check gets the
very ids, in the same order, its own statement gives. The conditions are the checks' own
rendered SQL, taken as they are: nothing of the rule is written twice; their parameters are
bound as each check binds them (a check whose parameter name another check of the table
binds to another value runs alone). Each condition is evaluated once a row (with a WHERE
too, SQLite evaluated each twice, and a condition's subquery twice). Every row comes back,
as two integers: the price of a statement for a big table, less than the statements saved
(about 6 % of a small ledger's quick check, measured; most of what a statement costs SQLite
is compiling its expressions, not the statement itself).

A check whose SQL has another shape, is not applicable or not run for this session runs its
own statement as before; if the shared statement fails (a damaged table, a condition that
does not parse on its own), every check of that table runs its own statement, so a failure
is reported by the check it belongs to.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from datasette_capsem import readonly
from datasette_capsem.checks.model import Check, CheckContext
from datasette_capsem.checks.sqlcheck import SqlCheck, _collect
from datasette_capsem.ledger.dialect import render_sql
from datasette_capsem.sqlfiles import load_sql

SIMPLE = re.compile(
    r"\A\s*(?:--[^\n]*\n\s*)*SELECT\s+id\s+FROM\s+"
    r"(?P<table>\"(?:[^\"]|\"\")+\"|[A-Za-z_][A-Za-z0-9_]*)\s+"
    r"WHERE\s+(?P<where>.+?)\s+ORDER\s+BY\s+id\s*\Z",
    re.S | re.I,
)
# A table's checks are read together from this many on (one alone gains nothing), up to
# MOST of them (the bits of one integer).
AT_LEAST = 2
MOST = 62
# Check i's term of the shared statement (sql/fused_rows.sql): its condition, as its own SQL.
_BIT = "(CASE WHEN (\n{condition}\n) THEN {bit} ELSE 0 END)"


def _simple_condition(sql: str, table: str) -> str | None:
    """The WHERE condition of `sql` if it is `SELECT id FROM <table> WHERE ... ORDER BY id`."""
    match = SIMPLE.match(sql)
    if match is None:
        return None
    named = match["table"]
    if named.startswith('"'):
        named = named[1:-1].replace('""', '"')
    return match["where"] if named == table else None


def _plan(
    chosen: list[Check], ctx: CheckContext
) -> list[tuple[str, dict[str, Any], list[tuple[str, str]]]]:
    """(shared SQL, its parameters, [(check id, table)]) per table with at least AT_LEAST simple checks,
    worked out once per file shape, liveness and list of checks (`ctx.memo`)."""
    key = ("fused", ctx.schema_key(), ctx.live, tuple(id(check) for check in chosen))
    plan = ctx.memo.get(key)
    if plan is not None:
        return plan
    by_table: dict[str, list[tuple[str, str]]] = {}
    bound: dict[str, dict[str, Any]] = {}  # a table's parameters, one value per name
    for check in chosen:
        if not isinstance(check, SqlCheck) or (check.only_when_stopped and ctx.live):
            continue
        for table in check.targets(ctx.schema):
            if table is None:
                continue
            variant = check._memo_variant(ctx, table)
            if isinstance(variant, str):
                continue
            condition = _simple_condition(variant[1], table)
            params = {**check.params, **check.table_params.get(table, {})}
            given = bound.setdefault(table, {})
            if condition is None or any(given.get(k, v) != v for k, v in params.items()):
                continue
            given.update(params)
            by_table.setdefault(table, []).append((check.id, condition))
    plan = []
    for table, checks in by_table.items():
        checks = checks[:MOST]
        if len(checks) < AT_LEAST:
            continue
        bits = " | ".join(
            render_sql(_BIT, fragments={"condition": condition, "bit": str(1 << place)})
            for place, (_, condition) in enumerate(checks)
        )
        sql = render_sql(load_sql(__package__, "fused_rows"), table=table, fragments={"bits": bits})
        plan.append((sql, bound[table], [(check_id, table) for check_id, _ in checks]))
    ctx.memo[key] = plan
    return plan


def read_shared(chosen: list[Check], ctx: CheckContext) -> None:
    """Fill `ctx.answered` for the simple checks of every table that has several of them."""
    if ctx.conn is None:
        return
    for sql, params, checks in _plan(chosen, ctx):
        try:
            rows = readonly.tolerant(
                ctx.conn, lambda sql=sql, params=params: ctx.conn.execute(sql, params).fetchall()
            )
        except sqlite3.Error:
            continue  # each check runs its own statement and reports its own failure
        flagged = [row for row in rows if row[1]]  # most rows break none of the checks
        for place, check in enumerate(checks):
            bit = 1 << place
            ctx.answered[check] = _collect(_Rows([(row[0],) for row in flagged if row[1] & bit]), 0)


class _Rows(list):
    """Rows as `_collect` reads a cursor: an `id` column only."""

    description: Any = (("id",),)
