"""Canned queries over Capsem files, chosen per database by what the file actually holds.

`canned_queries_for` is the one place that decides which queries a database gets; the
Datasette 0.65 `canned_queries` hook calls it today, and a Datasette 1.0 stored-query
registration can call it tomorrow.
"""

from __future__ import annotations

from typing import Any

from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.plugins import collect
from datasette_capsem.queries.spec import DATABASE_KINDS, QueryPart, QuerySpec, load_specs

__all__ = [
    "DATABASE_KINDS",
    "QueryPart",
    "QuerySpec",
    "all_specs",
    "canned_queries_for",
    "load_specs",
    "missing_for",
    "spec_for",
]


def all_specs() -> list[QuerySpec]:
    """Every registered query variant, built-in and from plugins."""
    return sorted(collect("capsem_queries", "id"), key=lambda s: (s.order, s.name, -s.priority))


def spec_for(name: str, schema: LedgerSchema, database_kind: str = "session") -> QuerySpec | None:
    """The variant of query `name` offered for this file (highest priority that applies)."""
    candidates = [
        spec
        for spec in all_specs()
        if spec.name == name
        and spec.applies_to(schema, database_kind)
        and spec.render(schema) is not None
    ]
    return max(candidates, key=lambda s: s.priority, default=None)


def missing_for(name: str, schema: LedgerSchema, database_kind: str = "session") -> list[str]:
    """What this file lacks for query `name`: the shortest list over its variants."""
    lists = [
        spec.missing_in(schema)
        for spec in all_specs()
        if spec.name == name and database_kind in spec.databases
    ]
    return min(lists, key=len, default=[f"a query named {name!r}"])


def canned_queries_for(schema: LedgerSchema, database_kind: str) -> dict[str, dict[str, Any]]:
    """Datasette canned queries for one database of `database_kind` with this schema.

    A query is left out when the file lacks what it needs, and when its name would shadow a
    table of the file (Datasette resolves `/<db>/<name>` to the canned query first).
    """
    chosen: dict[str, tuple[QuerySpec, dict[str, Any]]] = {}
    for spec in all_specs():
        if spec.name in schema.tables or not spec.applies_to(schema, database_kind):
            continue
        held = chosen.get(spec.name)
        if held is not None and held[0].priority >= spec.priority:
            continue
        canned = spec.canned(schema)
        if canned is not None:
            chosen[spec.name] = (spec, canned)
    return {name: canned for name, (_spec, canned) in chosen.items()}
