"""Lazy mounting of session ledgers into Datasette, bounded by least-recently-used eviction."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from datasette.utils.internal_db import init_internal_db, populate_schema_tables

from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.config import Settings
from datasette_capsem.mount.ledger_db import LedgerDatabase, _quick_fingerprint
from datasette_capsem.mount.readonly import LedgerUnavailable

MAIN_DATABASE = "main"
INTERNAL_TABLES = ("tables", "columns", "foreign_keys", "indexes", "databases")


class Mounter:
    """Owns which Capsem files are attached to Datasette, and detaches the idle ones."""

    def __init__(self, datasette, catalog: Catalog, settings: Settings):
        self.datasette = datasette
        self.catalog = catalog
        self.settings = settings
        self.mounted: OrderedDict[str, LedgerDatabase] = OrderedDict()
        self._lock = asyncio.Lock()
        self.mount_count = 0
        self.evict_count = 0
        self.schema_cache = SchemaRefreshCache()

    async def session_database(self, session: Session) -> LedgerDatabase:
        """The mounted database of a session, mounting it first if needed."""
        name = self.catalog.database_name(session)
        if name in self.mounted:
            self.mounted.move_to_end(name)
            return self.mounted[name]
        if session.ledger_path is None:
            raise LedgerUnavailable("missing", session.dir_path or session.id, "no ledger on disk")
        async with self._lock:
            if name not in self.mounted:
                await self._mount(name, session)
                await self._evict_beyond_bound()
        return self.mounted[name]

    def touch(self, name: str) -> None:
        if name in self.mounted:
            self.mounted.move_to_end(name)

    def ensure_main(self) -> LedgerDatabase | None:
        """Mount main.db as `main` (or re-mount it if it appeared); None when there is none."""
        existing = self.datasette.databases.get(MAIN_DATABASE)
        if isinstance(existing, LedgerDatabase):
            return existing
        path = self.catalog.snapshot().main_db_path
        if path is None:
            return None
        try:
            database = LedgerDatabase(self.datasette, path, self.settings.cache_dir)
        except LedgerUnavailable:
            return None
        self.datasette.add_database(database, name=MAIN_DATABASE, route=MAIN_DATABASE)
        return database

    async def _mount(self, name: str, session: Session) -> None:
        database = LedgerDatabase(self.datasette, session.ledger_path, self.settings.cache_dir)
        self.datasette.add_database(database, name=name, route=name)
        self.mounted[name] = database
        self.mount_count += 1
        try:
            await database.ledger_schema()  # fail now, not on the page, if SQLite rejects it
        except LedgerUnavailable:
            await self.evict(name)
            raise

    async def _evict_beyond_bound(self) -> None:
        while len(self.mounted) > self.settings.max_mounted:
            oldest = next(iter(self.mounted))
            await self.evict(oldest)

    async def evict(self, name: str) -> None:
        database = self.mounted.pop(name, None)
        if database is None:
            return
        if name in self.datasette.databases:
            self.datasette.remove_database(name)
        self.schema_cache.forget(name)
        await _forget_internal_rows(self.datasette, name)
        database.close()
        self.evict_count += 1

    async def close_all(self) -> None:
        for name in list(self.mounted):
            await self.evict(name)


async def _forget_internal_rows(datasette, name: str) -> None:
    """Drop Datasette's cached schema rows of an unmounted database so they do not pile up."""
    internal = datasette.databases.get("_internal")
    if internal is None or not datasette.internal_db_created:
        return

    def delete(conn):
        for table in INTERNAL_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE database_name = ?", [name])
        conn.commit()

    await internal.execute_write_fn(delete)


class SchemaRefreshCache:
    """Remembers each database's file fingerprint at its last schema refresh.

    Datasette 0.65 runs `PRAGMA schema_version` on every attached database on every core
    request. For Capsem files a schema can only change if the file or its WAL changed, which
    two `stat` calls tell without touching the SQL thread pool.
    """

    def __init__(self):
        self._seen: dict[str, tuple] = {}

    def unchanged(self, name: str, database) -> bool:
        if not isinstance(database, LedgerDatabase):
            return False
        return self._seen.get(name) == _quick_fingerprint(database.source_path)

    def remember(self, name: str, database) -> None:
        if isinstance(database, LedgerDatabase):
            self._seen[name] = _quick_fingerprint(database.source_path)

    def forget(self, name: str) -> None:
        self._seen.pop(name, None)


async def refresh_schemas(datasette, schema_cache: SchemaRefreshCache) -> None:
    """Datasette's `_refresh_schemas`, skipping databases whose files have not changed."""
    internal = datasette.databases["_internal"]
    if not datasette.internal_db_created:
        await init_internal_db(internal)
        datasette.internal_db_created = True
    known = None
    for name, database in list(datasette.databases.items()):
        if name == "_internal" or schema_cache.unchanged(name, database):
            continue
        if known is None:
            rows = await internal.execute("select database_name, schema_version from databases")
            known = {row["database_name"]: row["schema_version"] for row in rows}
        try:
            version = (await database.execute("PRAGMA schema_version")).first()[0]
        except LedgerUnavailable:
            continue
        if version != known.get(name):
            await internal.execute_write(
                "INSERT OR REPLACE INTO databases (database_name, path, is_memory, schema_version)"
                " VALUES (?, ?, ?, ?)",
                [name, str(database.path), database.is_memory, version],
            )
            await populate_schema_tables(internal, database)
        schema_cache.remember(name, database)
