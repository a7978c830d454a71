"""Checks written as SQL: each returns one row per offending row of its table.

Contract of a check's SQL: the first column named `id` (or `row_id`, else the first column)
identifies the offending row of the check's table; an optional `reason` or `detail` column
explains it. The engine counts the rows and keeps a sample. A check may instead name a canned
query (`query`), so the rows a user opens to see the proof are exactly the rows counted.

Per-table checks write `{table}` where the table name goes (in `requires` too) and list the
tables in `tables`; only names from that list are substituted, never data (`ledger/dialect.py`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from itertools import chain
from typing import Any

from datasette_capsem import readonly
from datasette_capsem.checks.model import Check, CheckContext, Finding
from datasette_capsem.ledger.dialect import render_sql
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.queries import missing_for, spec_for
from datasette_capsem.sqlfiles import load_sql

TABLE_MARKER = "{table}"
ID_COLUMNS = ("id", "row_id")
DETAIL_COLUMNS = ("reason", "detail")


@dataclass(frozen=True)
class SqlVariant:
    """One way to run a check; the first variant whose requirements hold is used."""

    sql: str | None = None
    query: str | None = None  # name of a canned query whose SQL is the check
    requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    note: str | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)  # for `{opt:alias.column}`

    def requirements(self, table: str | None) -> dict[str, tuple[str, ...]]:
        return {
            (table if name == TABLE_MARKER and table else name): tuple(columns)
            for name, columns in self.requires.items()
        }


@dataclass
class SqlCheck(Check):
    """A check whose offending rows a SELECT returns (see the module docstring)."""

    id: str
    kind: str
    explanation: str
    variants: tuple[SqlVariant, ...]
    table: str | None = None
    tables: tuple[str, ...] = ()
    severity: str | None = None
    title: str | None = None
    live_severity: str | None = None  # severity to use on a live session
    only_when_stopped: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)
    table_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def targets(self, schema: LedgerSchema) -> list[str | None]:
        """Tables this check runs on: all listed tables the file has (or the single table)."""
        if not self.tables:
            return [self.table]
        present = [table for table in self.tables if table in schema.tables]
        return present or [None]

    def run(self, ctx: CheckContext) -> list[Finding]:
        return [self._run_on(ctx, table) for table in self.targets(ctx.schema)]

    def _run_on(self, ctx: CheckContext, table: str | None) -> Finding:
        if self.tables and table is None:
            return self.not_applicable(ctx, f"the file has none of {', '.join(self.tables)}")
        chosen = self._memo_variant(ctx, table)
        if isinstance(chosen, str):
            return self.not_applicable(ctx, chosen, table)
        if ctx.conn is None:
            return self.not_applicable(ctx, "no ledger on disk", table)
        if self.only_when_stopped and ctx.live:
            return self.not_applicable(ctx, "the session is live, so this can still change", table)
        variant, sql = chosen
        return self._execute(ctx, table, variant, sql)

    def _memo_variant(self, ctx: CheckContext, table: str | None) -> tuple[SqlVariant, str] | str:
        """`_variant`, worked out once per file shape of a run (most files of a home share a
        few shapes, and resolving canned queries and optional columns is pure Python)."""
        key = ("sql-variant", self.id, table, ctx.schema_key())
        chosen = ctx.memo.get(key)
        if chosen is None:
            chosen = ctx.memo[key] = self._variant(ctx.schema, table)
        return chosen

    def _variant(self, schema: LedgerSchema, table: str | None) -> tuple[SqlVariant, str] | str:
        """The first variant this file can run, with its SQL; else why none applies."""
        missing: list[str] = []
        for variant in self.variants:
            absent = schema.missing(variant.requirements(table))
            if absent:
                missing = missing or absent
                continue
            sql = self._sql_of(variant, schema, table)
            if sql is not None:
                return variant, sql
            missing = missing or _query_missing(variant.query, schema)
        return f"not applicable to this era: the file lacks {', '.join(missing)}"

    @staticmethod
    def _sql_of(variant: SqlVariant, schema: LedgerSchema, table: str | None) -> str | None:
        if variant.query:
            spec = spec_for(variant.query, schema)
            return spec.render(schema) if spec else None
        return render_sql(variant.sql or "", schema, aliases=variant.aliases, table=table)

    def _execute(self, ctx: CheckContext, table: str | None, variant: SqlVariant, sql: str):
        severity = self.live_severity if (ctx.live and self.live_severity) else None
        answered = ctx.answered.get((self.id, table))
        if answered is not None:  # read with the table's other simple checks (`fused`)
            ids, details = answered
        else:
            params = {**self.params, **self.table_params.get(table or "", {})}
            try:
                ids, details = readonly.tolerant(
                    ctx.conn, lambda: _collect(ctx.conn.execute(sql, params), ctx.sample_limit)
                )
            except sqlite3.DatabaseError as error:
                return self.finding(ctx, table=table, failed=str(error), note=variant.note)
        if not ids:  # most checks of most ledgers: nothing to sample or link
            if severity:
                return self.finding(ctx, table=table, note=variant.note, severity=severity)
            return self.finding(ctx, table=table, note=variant.note)
        sample = list(ids)[: ctx.sample_limit]
        link = self._link(ctx, table, variant, sample)
        values: dict[str, Any] = {"table": table, "count": len(ids), "row_ids": sample}
        values["offending"] = tuple(ids)
        values.update(link=link, note=variant.note, details=details)
        if severity:
            values["severity"] = severity
        return self.finding(ctx, **values)

    @staticmethod
    def _link(ctx: CheckContext, table, variant: SqlVariant, sample: list) -> str | None:
        if variant.query:
            return ctx.query_link(variant.query)
        return ctx.table_link(table, sample)


def _query_missing(name: str | None, schema: LedgerSchema) -> list[str]:
    return missing_for(name or "", schema)


def _collect(cursor: sqlite3.Cursor, sample_limit: int) -> tuple[dict[Any, None], dict[str, str]]:
    """Distinct offending ids in result order, and the reason of each sampled one."""
    rows = iter(cursor)
    first = next(rows, None)
    if first is None:  # most checks of most ledgers
        return {}, {}
    names = [column[0] for column in cursor.description]
    id_index = next((names.index(c) for c in ID_COLUMNS if c in names), 0)
    detail_index = next((names.index(c) for c in DETAIL_COLUMNS if c in names), None)
    ids: dict[Any, None] = {}
    details: dict[str, str] = {}
    for row in chain((first,), rows):
        row_id = row[id_index]
        if row_id in ids:
            continue
        ids[row_id] = None
        if detail_index is not None and len(details) < sample_limit and row[detail_index]:
            details[str(row_id)] = str(row[detail_index])
    return ids, details


# -- loading built-in SQL checks from files ---------------------------------------------------


def _variant_from(package: str, stem: str, raw: Mapping[str, Any]) -> SqlVariant:
    query = raw.get("query")
    sql = None if query else load_sql(package, raw.get("sql") or stem)
    requires = {table: tuple(columns) for table, columns in (raw.get("requires") or {}).items()}
    aliases = dict(raw.get("aliases") or {})
    return SqlVariant(
        sql=sql, query=query, requires=requires, note=raw.get("note"), aliases=aliases
    )


def check_from_document(package: str, stem: str, document: Mapping[str, Any]) -> SqlCheck:
    """One SqlCheck from `<package>/sql/<stem>.json` (SQL in `<stem>.sql` unless named)."""
    raw_variants = document.get("variants") or [document]
    return SqlCheck(
        id=document.get("id") or stem,
        kind=document.get("kind") or stem,
        explanation=document["explanation"],
        variants=tuple(_variant_from(package, stem, raw) for raw in raw_variants),
        table=document.get("table"),
        tables=tuple(document.get("tables") or ()),
        severity=document.get("severity"),
        title=document.get("title"),
        live_severity=document.get("live_severity"),
        only_when_stopped=bool(document.get("only_when_stopped", False)),
        params=dict(document.get("params") or {}),
        table_params={k: dict(v) for k, v in (document.get("table_params") or {}).items()},
    )


def load_checks(package: str) -> list[SqlCheck]:
    """Every SQL check described by `<package>/sql/*.json`."""
    folder = resources.files(package).joinpath("sql")
    checks = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            stem = entry.name[: -len(".json")]
            checks.append(check_from_document(package, stem, json.loads(entry.read_text("utf-8"))))
    return checks
