"""Lazy mounting of session ledgers into Datasette, bounded by least-recently-used eviction.

A request pins the database it reads for its whole lifetime, so eviction (caused by other
requests mounting other sessions) never pulls a ledger from under a page that is rendering;
the bound may be exceeded briefly while more than `max_mounted` requests are in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter, OrderedDict

from datasette.utils.internal_db import init_internal_db, populate_schema_tables

from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.config import Settings, split_qualified
from datasette_capsem.memory import trim_malloc
from datasette_capsem.mount.ledger_db import LedgerDatabase
from datasette_capsem.readonly import LedgerUnavailable, file_fingerprint

MAIN_DATABASE = "main"
# Datasette's _internal catalog: the schema version it last recorded per attached database, and
# the statement recording (or updating) one attached database.
INTERNAL_VERSIONS = "SELECT database_name, schema_version FROM databases"
INTERNAL_RECORD_DATABASE = (
    "INSERT OR REPLACE INTO databases (database_name, path, is_memory, schema_version)"
    " VALUES (?, ?, ?, ?)"
)
# Datasette 1.0's internal catalog: what it recorded per attached database, the databases its
# tables name, and the statements forgetting one (child tables first, as 1.0 deletes them).
CATALOG_VERSIONS = "SELECT database_name, schema_version FROM catalog_databases"
CATALOG_NAMED = (
    "SELECT database_name FROM catalog_columns UNION SELECT database_name FROM"
    " catalog_foreign_keys UNION SELECT database_name FROM catalog_indexes UNION SELECT"
    " database_name FROM catalog_views UNION SELECT database_name FROM catalog_tables"
)
CATALOG_FORGET = (
    "DELETE FROM catalog_columns WHERE database_name = ?",
    "DELETE FROM catalog_foreign_keys WHERE database_name = ?",
    "DELETE FROM catalog_indexes WHERE database_name = ?",
    "DELETE FROM catalog_views WHERE database_name = ?",
    "DELETE FROM catalog_tables WHERE database_name = ?",
    "DELETE FROM catalog_databases WHERE database_name = ?",
)
# How often mounting looks for mounted ledgers Capsem deleted: a stat of every mounted file
# (32 by default) was a fifth of a first visit's own work when done on each mount.
VANISHED_CHECK_SECONDS = 5.0
# Mounted ledgers used last whose connections keep their page cache; older ones are shrunk
# when they leave this set (LedgerDatabase.shrink): 32 mounted ledgers held ~5 MB of pages.
HOT_CONNECTIONS = 4
# Mounted ledgers used last that keep their connection; older ones close it when they leave
# this set (LedgerDatabase.disconnect) and open a new one when asked again. Each connection
# held ~0.42 MB of SQLite's heap (its prepared statements: Datasette's ~100 queries of a table
# page, and schema) plus ~70 KB of Python (the statement cache's SQL text): 32 connected
# ledgers were 16 MB of a 104 MB server after 1,000 visits. Eight: a ledger viewed again
# after seven others prepares its page's statements again (~4 ms; a warm page 13 -> 17 ms),
# and the server stays under 100 MB after 1,000 visits (20 gave 103-106 MB in full runs).
CONNECTED_LEDGERS = 8
# Closed connections leave holes in glibc's heap (their statements and schema, ~0.4 MB each);
# after this many evictions the free pages go back to the OS (memory.trim_malloc, ~1 ms).
TRIM_EVERY_EVICTIONS = 32


class Mounter:
    """Owns which Capsem files are attached to Datasette, and detaches the idle ones."""

    def __init__(
        self, datasette, catalog: Catalog, settings: Settings, taken: frozenset[str] = frozenset()
    ):
        self.datasette = datasette
        # Names the user's own databases hold (state.Role): never a Capsem database here.
        self.taken = taken
        self.catalog = catalog
        self.settings = settings
        self.mounted: OrderedDict[str, LedgerDatabase] = OrderedDict()
        self.pins: Counter[str] = Counter()
        self._lock = asyncio.Lock()
        self.mount_count = 0
        self.evict_count = 0
        self.schema_cache = SchemaRefreshCache()
        self._vanished_checked = float("-inf")
        self._hot_head: str | None = None  # the ledger `_touch`ed last

    async def session_database(self, session: Session) -> LedgerDatabase:
        """The mounted database of a session, mounting it first if needed."""
        name = self.catalog.database_name(session)
        if name not in self.mounted:
            if session.ledger_path is None:
                raise LedgerUnavailable(
                    "missing", session.dir_path or session.id, "no ledger on disk"
                )
            async with self._lock:
                if name not in self.mounted:
                    self._evict_vanished()
                    await self._mount(name, session)
        database = self.mounted[name]
        self._touch(name)
        self._evict_beyond_bound(keep=name)
        return database

    def _touch(self, name: str) -> None:
        """`name` is the ledger used last; the one this pushes out of the HOT_CONNECTIONS
        used last frees its page cache, the one it pushes out of the CONNECTED_LEDGERS closes
        its connection."""
        if next(reversed(self.mounted)) == name and self._hot_head == name:
            return
        self.mounted.move_to_end(name)
        self._hot_head = name
        cooled = next(itertools.islice(reversed(self.mounted), HOT_CONNECTIONS, None), None)
        if cooled is not None:
            self.mounted[cooled].shrink()
        idle = next(itertools.islice(reversed(self.mounted), CONNECTED_LEDGERS, None), None)
        if idle is not None:
            self.mounted[idle].disconnect()

    def pin(self, name: str) -> None:
        """Keep `name` mounted (once mounted) until a matching `unpin`."""
        self.pins[name] += 1
        if name in self.mounted:
            self._touch(name)

    def unpin(self, name: str) -> None:
        self.pins[name] -= 1
        if self.pins[name] <= 0:
            del self.pins[name]
            self._evict_beyond_bound()

    def main_label(self, name: str) -> str | None:
        """The label of the home whose main.db the database `name` is ("" for `main` of an
        unlabelled instance; `<label>--main` for a labelled home's), None for any other (and
        for a database of the user's own that holds the name)."""
        if name in self.taken:
            return None
        if not self.catalog.labelled:
            return "" if name == MAIN_DATABASE else None
        qualified = split_qualified(name)
        if qualified and qualified[1] == MAIN_DATABASE and self.catalog.home_state(qualified[0]):
            return qualified[0]
        return None

    def ensure_mains(self) -> None:
        """Mount every home's main.db that is there."""
        for name in self.catalog.main_database_names():
            if name not in self.taken:
                self.ensure_main(name)

    def ensure_main(self, name: str = MAIN_DATABASE) -> LedgerDatabase | None:
        """Mount a home's main.db as `name` (`main`, or `<label>--main`), or re-mount it if it
        appeared; None when there is none."""
        existing = self.datasette.databases.get(name)
        if isinstance(existing, LedgerDatabase):
            return existing
        label = self.main_label(name)
        path = self.catalog.main_db_path(label) if label is not None else None
        if path is None:
            return None
        try:
            database = LedgerDatabase(self.datasette, path, self.settings.cache_dir, kind="main")
        except LedgerUnavailable:
            return None
        self.datasette.add_database(database, name=name, route=name)
        return database

    async def _mount(self, name: str, session: Session) -> None:
        database = LedgerDatabase(self.datasette, session.ledger_path, self.settings.cache_dir)
        try:
            await database.ledger_schema()  # fail now, not on the page, if SQLite rejects it
        except LedgerUnavailable:
            database.close()
            raise
        self.datasette.add_database(database, name=name, route=name)
        self.mounted[name] = database
        self.mount_count += 1

    def _evict_beyond_bound(self, keep: str | None = None) -> None:
        # Oldest first; never a pinned one, nor `keep`, which a caller is about to use.
        idle = [name for name in self.mounted if name not in self.pins and name != keep]
        for name in idle[: max(0, len(self.mounted) - self.settings.max_mounted)]:
            self.evict(name)

    def _evict_vanished(self) -> None:
        """Unmount idle ledgers whose file Capsem deleted (a stopped ephemeral VM), so their
        descriptors are released. Checked when mounting, at most every few seconds."""
        now = time.monotonic()
        if now - self._vanished_checked < VANISHED_CHECK_SECONDS:
            return
        self._vanished_checked = now
        for name in [n for n in self.mounted if n not in self.pins]:
            if not self.mounted[name].file_exists:
                self.evict(name)

    def evict(self, name: str) -> None:
        database = self.mounted.pop(name, None)
        if database is None:
            return
        # By the name Datasette gave it, which differs from ours if ours was already taken.
        if self.datasette.databases.get(database.name) is database:
            self.datasette.remove_database(database.name)
        self.schema_cache.forget(name)
        database.close()
        self.evict_count += 1
        if self.evict_count % TRIM_EVERY_EVICTIONS == 0:
            trim_malloc()

    def is_session_mount(self, name: str) -> bool:
        return name in self.mounted


class SchemaRefreshCache:
    """Remembers each database's file fingerprint at its last schema refresh.

    Datasette 0.65 runs `PRAGMA schema_version` on every attached database on every core
    request. A file's schema can only change if the file or its WAL changed, which two `stat`
    calls tell without a round trip through the SQL thread pool; an in-memory database
    (`_memory`) is checked once: a read-only instance refuses every write to it.
    """

    def __init__(self):
        self._seen: dict[str, tuple] = {}

    @staticmethod
    def fingerprint(database) -> tuple | None:
        if isinstance(database, LedgerDatabase):
            return file_fingerprint(database.source_path)
        if database.is_memory:
            return ("memory",)
        return file_fingerprint(database.path) if database.path else None

    def unchanged(self, name: str, fingerprint: tuple | None) -> bool:
        return fingerprint is not None and self._seen.get(name) == fingerprint

    def remember(self, name: str, fingerprint: tuple | None) -> None:
        """Taken before the refresh read the schema: a change meanwhile is seen next time."""
        if fingerprint is not None:
            self._seen[name] = fingerprint

    def forget(self, name: str) -> None:
        self._seen.pop(name, None)


async def refresh_schemas(datasette, mounter: Mounter) -> None:
    """Datasette's `_refresh_schemas`, for the databases that need it.

    Skipped: files unchanged since the last refresh, and session ledgers altogether.
    Datasette 0.65 itself never reads the `_internal` schema tables; filling them for every
    mounted ledger (about 110 tables and indexes each) made mounting several times slower.
    """
    internal = datasette.databases["_internal"]
    if not datasette.internal_db_created:
        await init_internal_db(internal)
        datasette.internal_db_created = True
    cache = mounter.schema_cache
    known = None
    for name, database in list(datasette.databases.items()):
        if name == "_internal" or mounter.is_session_mount(name):
            continue
        fingerprint = cache.fingerprint(database)
        if cache.unchanged(name, fingerprint):
            continue
        if known is None:
            rows = await internal.execute(INTERNAL_VERSIONS)
            known = {row["database_name"]: row["schema_version"] for row in rows}
        try:
            version = (await database.execute("PRAGMA schema_version")).first()[0]
        except LedgerUnavailable:
            continue
        if version != known.get(name):
            await internal.execute_write(
                INTERNAL_RECORD_DATABASE,
                [name, str(database.path), database.is_memory, version],
            )
            await populate_schema_tables(internal, database)
        cache.remember(name, fingerprint)


async def refresh_catalog(datasette, mounter: Mounter) -> None:
    """Datasette 1.0's `_refresh_schemas` (its internal catalog of every attached database's
    tables and columns, which its permission checks and table lists read), with two changes
    for Capsem's files only: one that cannot be read now (Capsem deleted it, a sync is still
    copying it) is skipped and keeps what the catalog last held, where Datasette's own refresh
    raised and failed every request of the instance until it was unmounted; and one unchanged
    since its last refresh (two `stat`s) is not asked its schema version again. Every other
    database is refreshed exactly as Datasette does."""
    internal = datasette.get_internal_database()
    if not datasette.internal_db_created:
        await init_internal_db(internal)
        await datasette.apply_metadata_json()
        datasette.internal_db_created = True
    known = {
        row["database_name"]: row["schema_version"]
        for row in await internal.execute(CATALOG_VERSIONS)
    }
    listed = set(known)
    rows = await internal.execute(CATALOG_NAMED)
    listed.update(row["database_name"] for row in rows if row["database_name"] is not None)
    stale = listed - set(datasette.databases)
    if stale:

        def forget_stale(conn) -> None:
            for name in stale:
                for statement in CATALOG_FORGET:
                    conn.execute(statement, [name])

        await internal.execute_write_fn(forget_stale)
    cache = mounter.schema_cache
    for name, database in list(datasette.databases.items()):
        ours = isinstance(database, LedgerDatabase)
        fingerprint = cache.fingerprint(database) if ours else None
        if ours and name in known and cache.unchanged(name, fingerprint):
            continue
        try:
            version = (await database.execute("PRAGMA schema_version")).first()[0]
            if version != known.get(name):
                await populate_schema_tables(internal, database, version)
        except LedgerUnavailable:
            if not ours:
                raise
            continue
        if ours:
            cache.remember(name, fingerprint)
