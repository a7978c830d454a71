"""Datasette's `canned_queries` hook: which kind of database a name is, and what it can answer.

Datasette 0.65 asks for canned queries on every database and table page, so the answer is
memoised per (database kind, file shape, registered plugins): the same schema always gets the
same queries, and rendering happens once.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

from datasette_capsem import permissions
from datasette_capsem.config import PLUGIN_NAME
from datasette_capsem.index import index_queries
from datasette_capsem.index.database import INDEX_DATABASE  # noqa: E402
from datasette_capsem.ledger.schema import LedgerSchema, read_schema
from datasette_capsem.plugins import plugin_manager
from datasette_capsem.queries import canned_queries_for
from datasette_capsem.readonly import LedgerUnavailable
from datasette_capsem.state import get_role, get_state


def database_kind(datasette, name: str) -> str | None:
    """'main', 'index' or 'session' for a Capsem database name; None for anything else (a
    database of the user's own, whatever its name)."""
    role = get_role(datasette)
    if not role.serving or name in role.own_databases:
        return None
    if get_state(datasette).mounter.main_label(name) is not None:
        return "main"
    if name == INDEX_DATABASE:
        return "index"
    if get_state(datasette).catalog.session_for_database(name) is not None:
        return "session"
    return None


async def _schema_of(database) -> LedgerSchema | None:
    try:
        if hasattr(database, "ledger_schema"):
            return await database.ledger_schema()
        return await database.execute_fn(read_schema)
    except (LedgerUnavailable, sqlite3.DatabaseError):
        return None


def _plugins_key() -> tuple[int, ...]:
    return tuple(sorted(id(plugin) for plugin in plugin_manager().get_plugins()))


@functools.lru_cache(maxsize=128)
def _cached(kind: str, tables: tuple, plugins: tuple[int, ...]) -> dict[str, dict[str, Any]]:
    return canned_queries_for(LedgerSchema(dict(tables)), kind)


async def canned_queries_for_database(datasette, name: str) -> dict[str, dict[str, Any]]:
    """Canned queries for the Datasette database `name` ({} when it is not a Capsem file)."""
    kind = database_kind(datasette, name)
    database = datasette.databases.get(name)
    if kind is None or database is None:
        return {}
    schema = await _schema_of(database)
    if schema is None:
        return {}
    # Datasette calls this once per query on every database page (a permission check each),
    # so the answer for a schema object is kept beside it; a changed file gets a new schema.
    key = (kind, _plugins_key())
    held = _by_schema.get(id(schema))
    if held is None or held[0] is not schema or held[1] != key:
        tables = tuple(sorted(schema.tables.items()))
        held = (schema, key, _cached(kind, tables, key[1]))
        if len(_by_schema) > 256:  # schemas of evicted mounts; cheap to rebuild
            _by_schema.clear()
        _by_schema[id(schema)] = held
    # Datasette only adds "name" (its own key) to each query dict; a shallow copy is enough.
    return dict(held[2])


# id(schema) -> (schema, key, queries); the schema is held so its id cannot be reused.
_by_schema: dict[int, tuple[LedgerSchema, tuple, dict[str, dict[str, Any]]]] = {}


async def store_queries(datasette, name: str) -> None:
    """Datasette 1.0 keeps stored queries in its internal database (`add_query`) and has no
    `canned_queries` hook: a Capsem database gets the same queries when it is mounted, again
    only when they changed (a re-mounted ledger of the same shape costs nothing). 0.65 asks the
    hook instead, and this does nothing there."""
    if not permissions.DATASETTE_1:
        return
    found = await all_queries_for_database(datasette, name)
    stored = datasette.__dict__.setdefault("_capsem_stored_queries", {})
    # A database removed and mounted again (eviction) is a new object: its queries again.
    queries = tuple(sorted((query_name, query["sql"]) for query_name, query in found.items()))
    key = (id(datasette.databases.get(name)), queries)
    previous = stored.get(name)
    if previous == key:
        return
    # A database just mounted: 1.0 lists tables and queries through its internal catalog,
    # which it refreshes at most once a second; bring it up to date now.
    await datasette.refresh_schemas(force=True)
    for query_name, query in found.items():
        await datasette.add_query(
            name,
            query_name,
            query["sql"],
            title=query.get("title"),
            description=query.get("description"),
            hide_sql=bool(query.get("hide_sql")),
            parameters=query.get("params"),
            # The plugin's own SQL, runnable without execute-sql (as a 0.65 canned query is);
            # the files are opened read-only and the secret policy applies as to any query.
            is_trusted=True,
            source=PLUGIN_NAME,
        )
    # A query no longer offered (its plugin unregistered, or the file replaced by one of an
    # era that cannot answer it) is no longer stored: 0.65's hook would not offer it either.
    offered = {query_name for query_name, _sql in queries}
    for query_name, _sql in previous[1] if previous else ():
        if query_name not in offered:
            await datasette.remove_query(name, query_name, source=PLUGIN_NAME)
    stored[name] = key


async def all_queries_for_database(datasette, name: str) -> dict[str, dict[str, Any]]:
    """Capsem's canned queries for main, index and every session database: the index's own,
    then those its schema admits; results first (the SQL behind a "show" toggle)."""
    found = index_queries() if name == INDEX_DATABASE else {}
    found.update(await canned_queries_for_database(datasette, name))
    return {query_name: {**query, "hide_sql": True} for query_name, query in found.items()}
