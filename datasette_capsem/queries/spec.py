"""Canned-query specifications: SQL in `.sql` files, metadata in a `.json` file beside it.

A Capsem file's shape depends on its era (spec §4.5), so a query says what it needs
(`requires`: {table: [columns]}) and is offered only where the file has it. Three small,
schema-driven templating features keep era differences out of Python and out of error pages:

* variants: several specs may share one query `name`; the highest `priority` whose
  requirements hold is offered (e.g. MCP usage from `mcp_calls` on old files);
* `{opt:alias.column}`: the column when the aliased table has it, else `NULL`;
* `{parts}`: a UNION ALL of fragments, each kept only if its own requirements hold, so a
  timeline covers whatever tables a file has. `{key}` names the chain column (also in
  `requires`).

The markers are those of the one renderer, `ledger/dialect.py`.

Only identifiers from our own metadata and the file's own schema are substituted; every value
a user supplies is a bound `:parameter`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from datasette_capsem.ledger.dialect import render_sql
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.sqlfiles import load_sql

DATABASE_KINDS = ("session", "main", "index")
PARTS_MARKER = "{parts}"
KEY_MARKER = "{key}"
IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PARAM_RE = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")

Requirements = Mapping[str, tuple[str, ...]]


def _requirements(raw: Mapping[str, Any] | None, key: str | None = None) -> dict:
    """{table: (columns...)} with `{key}` resolved to the chain column."""
    resolved = {}
    for table, columns in (raw or {}).items():
        resolved[table] = tuple(key if c == KEY_MARKER and key else c for c in columns)
    return resolved


@dataclass(frozen=True)
class QueryPart:
    """One UNION ALL arm of a composite query; `group` picks one variant per table."""

    sql: str
    requires: Requirements = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    group: str | None = None

    def render(self, schema: LedgerSchema, key: str | None = None) -> str | None:
        if not schema.has_all(self.requires):
            return None
        return render_sql(self.sql, schema, aliases=self.aliases, key=key)


@dataclass(frozen=True)
class QuerySpec:
    """A canned query: what it shows, what it needs, and its SQL.

    `id` is unique; `name` is the canned-query name (shared by era variants of one query).
    `databases` are the kinds of database it is offered on: session, main or index.
    """

    id: str
    name: str
    title: str
    description: str
    sql: str
    databases: tuple[str, ...] = ("session",)
    params: tuple[str, ...] = ()
    requires: Requirements = field(default_factory=dict)
    priority: int = 0
    order: int = 100
    aliases: Mapping[str, str] = field(default_factory=dict)
    parts: tuple[QueryPart, ...] = ()
    key: str | None = None

    def applies_to(self, schema: LedgerSchema, kind: str) -> bool:
        return kind in self.databases and schema.has_all(self.requires)

    def missing_in(self, schema: LedgerSchema) -> list[str]:
        """What this file lacks for this variant (for a composite: for every part)."""
        absent = schema.missing(self.requires)
        if not absent and self.parts and not self._rendered_parts(schema):
            absent = sorted({m for part in self.parts for m in schema.missing(part.requires)})
        return absent

    def render(self, schema: LedgerSchema) -> str | None:
        """The SQL for this file, or None when no part of a composite query applies."""
        fragments = {}
        if PARTS_MARKER in self.sql:
            arms = self._rendered_parts(schema)
            if not arms:
                return None
            fragments["parts"] = "\n    UNION ALL\n".join(arms)
        return render_sql(self.sql, schema, aliases=self.aliases, key=self.key, fragments=fragments)

    def _rendered_parts(self, schema: LedgerSchema) -> list[str]:
        arms, groups_done = [], set()
        for part in self.parts:
            if part.group and part.group in groups_done:
                continue
            rendered = part.render(schema, self.key)
            if rendered is None:
                continue
            arms.append(rendered.strip().rstrip(";"))
            if part.group:
                groups_done.add(part.group)
        return arms

    def canned(self, schema: LedgerSchema) -> dict[str, Any] | None:
        """Datasette's canned-query dict for this file, or None when it cannot run here."""
        sql = self.render(schema)
        if sql is None:
            return None
        return {
            "sql": sql,
            "title": self.title,
            "description": self.description,
            "params": list(self.params),
        }


# -- loading specs from package files ---------------------------------------------------------


def _json_documents(package: str) -> dict[str, dict]:
    folder = resources.files(package).joinpath("sql")
    documents = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".json"):
            documents[entry.name[: -len(".json")]] = json.loads(entry.read_text("utf-8"))
    return documents


def _resolve_extends(stem: str, documents: dict[str, dict]) -> dict:
    """A document with `extends` inherits every field of its parent it does not set."""
    document = documents[stem]
    parent = document.get("extends")
    if not parent:
        return document
    merged = dict(_resolve_extends(parent, documents))
    merged.pop("name", None)
    merged.setdefault("sql", parent)
    merged.update({k: v for k, v in document.items() if k != "extends"})
    return merged


def _part(package: str, raw: Mapping[str, Any], key: str | None) -> QueryPart:
    return QueryPart(
        sql=load_sql(package, raw["sql"]),
        requires=_requirements(raw.get("requires"), key),
        aliases=dict(raw.get("aliases") or {}),
        group=raw.get("group"),
    )


def spec_from_document(package: str, stem: str, document: Mapping[str, Any]) -> QuerySpec:
    """Build one QuerySpec from its JSON document; `sql` defaults to the document's stem."""
    key = document.get("key")
    if key is not None and not IDENTIFIER_RE.match(key):
        raise ValueError(f"query {stem}: key {key!r} is not an identifier")
    databases = tuple(document.get("databases") or ("session",))
    unknown = set(databases) - set(DATABASE_KINDS)
    if unknown:
        raise ValueError(f"query {stem}: unknown database kinds {sorted(unknown)}")
    return QuerySpec(
        id=stem,
        name=document.get("name") or stem,
        title=document["title"],
        description=document["description"],
        sql=load_sql(package, document.get("sql") or stem),
        databases=databases,
        params=tuple(document.get("params") or ()),
        requires=_requirements(document.get("requires"), key),
        priority=int(document.get("priority", 0)),
        order=int(document.get("order", 100)),
        aliases=dict(document.get("aliases") or {}),
        parts=tuple(_part(package, raw, key) for raw in document.get("parts") or ()),
        key=key,
    )


def load_specs(package: str) -> list[QuerySpec]:
    """Every query described by `<package>/sql/*.json` (abstract documents are skipped)."""
    documents = _json_documents(package)
    specs = []
    for stem in sorted(documents):
        document = _resolve_extends(stem, documents)
        if document.get("abstract"):
            continue
        specs.append(spec_from_document(package, stem, document))
    return specs


def sql_parameters(sql: str) -> set[str]:
    """Named `:parameters` in SQL text (comments and string literals stripped first)."""
    without_strings = re.sub(r"'(?:[^']|'')*'", "''", sql)
    without_comments = re.sub(r"--[^\n]*|/\*.*?\*/", " ", without_strings, flags=re.S)
    return set(PARAM_RE.findall(without_comments))
