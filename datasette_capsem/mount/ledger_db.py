"""A Datasette Database over a Capsem file that is read-only by construction.

Datasette 0.65 keeps one connection per worker thread per database *name* in a module-level
thread-local that it never closes, so remounting a name reuses stale connections and every
mount/unmount leaks descriptors (datasette-notes.md). This class owns a single connection
instead, used by one SQL thread at a time and closed when the database is evicted. One
connection per ledger (not one per thread) also keeps memory and descriptors per mount low:
each SQLite connection holds its own parsed copy of the ~110-object ledger schema.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from datasette.database import Database, QueryInterrupted, Results
from datasette.utils import sqlite_timelimit

from datasette_capsem import readonly, redaction
from datasette_capsem.ledger.schema import LedgerSchema, read_schema
from datasette_capsem.readonly import file_fingerprint
from datasette_capsem.sqlfiles import load_sql

# The request being served (an opaque token, set by the ASGI layer; None outside requests). A
# file is stat'ed once per request, not before each of the ~90 queries of a table page (two
# stats, ~27 us, each: 10 % of the page's CPU); the queries of one page read one file plan.
request_scope: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "capsem_request_scope", default=None
)

# Whether the request being served may run Datasette's own queries in the event loop's thread
# (see `LedgerDatabase.execute_fn`): set by the ASGI layer, False for a request that brings SQL
# of its own (`?sql=`, `_where=`) and outside requests.
inline_queries: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "capsem_inline_queries", default=False
)
# A file this small bounds each of Datasette's queries on it to a few milliseconds; after
# INLINE_SLOW_STRIKES that took longer than INLINE_SLOW_SECONDS anyway (not one: a garbage
# collection may land in any query), that database's queries go back to the SQL threads.
INLINE_MAX_BYTES = 2 << 20
INLINE_SLOW_SECONDS = 0.05
INLINE_SLOW_STRIKES = 3

log = logging.getLogger(__name__)

# Facet counts of a file no writer holds, by statement, parameters and reader policy: a table
# page counts each facet column over the whole (filtered) table on every view (six facets of
# a 72,000-row table: most of a second), so each count is run once per file version. A count
# that overran Datasette's facet time limit is run once more in the background, within the
# instance's SQL time limit, so the next view shows it.
# Facet suggestions (a statement per column and kind, each under Datasette's suggestion time
# limit: 50 ms each, most of a big table page's time) are kept the same way, and one that
# overran its limit or failed (json_type of a column that is not JSON) is kept as its error:
# not suggested, as Datasette decides.
FACET_RESULTS_KEPT = 256  # per mounted file; each at most 100 rows (a date suggestion)
# A file this big (about 30,000 rows of a generated session) has its whole-file answers computed
# apart and its slow pages answer at once while they are (views/integrity.py, views/pending.py);
# a facet count of it not known yet for this file version is not run in the request at all: the
# page lists it as timed out (and says it is being counted, `facets_counting`) at once, and it
# is counted in the background for the next view.
BIG_LEDGER_BYTES = 32 * 2**20
# A table page's count of its rows, as Datasette writes it (0.65: the whole count; 1.0: up to
# its count limit): kept per file version like a facet count; on a big ledger (seconds from a
# cold disk: the whole of a table's smallest index) counted in the background, the page saying
# so. Its background run is allowed `ROW_COUNT_LIMIT_MS`, not the request's time limit.
TABLE_COUNT = "select count(*) from "
ROW_COUNT_LIMIT_MS = 60_000
# The keys of the facet counts a request left to the background (a list per request, set by the
# ASGI layer; None outside requests): what its page says is being counted.
facets_counting: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "capsem_facets_counting", default=None
)
# Which columns of the table a request reads Datasette may suggest a facet on (a predicate on
# a column name, set by the ASGI layer: core_pages/lazy_mount.py `suggestion_columns`), or
# None: all, as Datasette does. Datasette's facet classes learn the columns to try from one
# probe (`Facet.get_columns`, 0.65 and 1.0: `COLUMNS_PROBE` around the table's statement),
# then run a statement or two per column and facet kind over the table: the probe answers
# without the other columns, so none of those runs on them.
facet_suggestion_columns: contextvars.ContextVar[Callable[[str], bool] | None] = (
    contextvars.ContextVar("capsem_facet_suggestion_columns", default=None)
)
COLUMNS_PROBE = ("select * from (", ") limit 0")

# Introspected schemas by the hash of their schema text, shared by every file of that shape.
MAX_SHAPES = 64
_shapes: dict[bytes, LedgerSchema] = {}


def read_shared_schema(conn: sqlite3.Connection) -> LedgerSchema:
    """`read_schema`, once per schema shape: one read of sqlite_master instead of a
    `pragma_table_info` per table, and one LedgerSchema object for all ledgers of an era."""
    (text,) = conn.execute(load_sql(__package__, "schema_shape")).fetchone()
    key = hashlib.blake2b((text or "").encode(), digest_size=16).digest()
    schema = _shapes.get(key)
    if schema is None:
        schema = read_schema(conn)
        if len(_shapes) >= MAX_SHAPES:
            _shapes.pop(next(iter(_shapes)), None)
        _shapes[key] = schema
    return schema


def _suggestable(sql: str, results: Results) -> Results:
    """`results`, or of Datasette's facet columns probe only the columns a facet may be
    suggested on (`facet_suggestion_columns`)."""
    suggestable = facet_suggestion_columns.get()
    if suggestable is None or results.rows:
        return results
    if not (sql.startswith(COLUMNS_PROBE[0]) and sql.endswith(COLUMNS_PROBE[1])):
        return results
    kept = [d for d in results.description if suggestable(d[0])]
    return Results(results.rows, results.truncated, kept)


class ReadOnlyDatabaseError(sqlite3.OperationalError):
    pass


def _bare(error: BaseException) -> BaseException:
    """`error` again without its traceback (nor those of the errors it carries): a kept error
    must not keep the frames it was raised through, and with them a connection's file, alive
    after its database is unmounted."""
    args = tuple(_bare(a) if isinstance(a, BaseException) else a for a in error.args)
    return type(error)(*args)


class LedgerDatabase(Database):
    """One mounted Capsem SQLite file (a session ledger or main.db)."""

    def __init__(self, ds, path: Path, cache_dir: Path, kind: str = "ledger"):
        self.source_path = Path(path)
        self.kind = kind  # "ledger" or "main": whose columns the registry classifies
        self.cache_dir = cache_dir
        self._state = readonly.inspect_file(self.source_path)  # raises LedgerUnavailable
        super().__init__(ds, path=str(self.source_path), is_mutable=True)
        self._fingerprint = self._state.stat_fingerprint  # what inspect_file just stat'ed
        self._generation = 0
        self._connection: tuple[int, sqlite3.Connection] | None = None
        self._policy: str | None = None  # the secret policy the connection enforces now
        self._queue: asyncio.Lock | None = None  # queries wait here, not in a pool thread
        self._use = threading.Lock()  # one thread on the connection, even after a cancel
        self._closed = False
        self._schema: LedgerSchema | None = None
        self._schema_generation = -1
        self._checked_in = request_scope.get()  # the request that last stat'ed the file
        self._inline = self._state.mode != "gz"  # a gz file's size is not what SQLite reads
        self._slow_queries = 0
        self._facets: OrderedDict[Hashable, Any] = OrderedDict()
        self._facets_running: dict[Hashable, asyncio.Task] = {}
        self._counting: asyncio.Lock | None = None  # background facet counts, one at a time
        self.facet_runs = 0  # facet counts run on the file (a view answered from memory runs none)
        self.suggestion_runs = 0  # facet suggestions run on the file, the same way
        self.row_count_runs = 0  # table row counts run on the file, the same way

    # -- what Datasette asks of every database ------------------------------------------------

    @property
    def size(self) -> int:
        try:
            return self.source_path.stat().st_size
        except OSError:  # Capsem deleted the session dir while it was mounted
            return 0

    @property
    def mtime_ns(self) -> int | None:
        try:
            return self.source_path.stat().st_mtime_ns
        except OSError:
            return None

    @property
    def open_mode(self) -> str:
        return self._state.mode

    @property
    def open_connection_count(self) -> int:
        return 0 if self._connection is None else 1

    @property
    def file_exists(self) -> bool:
        return self.source_path.exists()

    # -- connections --------------------------------------------------------------------------

    def connect(self, write: bool = False) -> sqlite3.Connection:
        if write:
            raise ReadOnlyDatabaseError("Capsem files are never opened for writing")
        conn = readonly.connect(self._state, self.cache_dir)
        self.ds._prepare_connection(conn, self.name)
        return conn

    def _checked_this_request(self) -> bool:
        scope = request_scope.get()
        return scope is not None and scope is self._checked_in

    def _revalidate(self) -> None:
        """Re-plan the open mode when the file or its WAL changed. Runs in the query's thread
        right before connecting, once per request (every time outside one), so a writer that
        comes or goes between two requests is seen by the next."""
        if self._checked_this_request():
            return
        fingerprint = file_fingerprint(self.source_path)
        if fingerprint != self._fingerprint:
            state = readonly.inspect_file(self.source_path)  # may raise: checked again next time
            self._fingerprint, self._state = fingerprint, state
            self._generation += 1
        self._checked_in = request_scope.get()

    def _current_connection(self) -> sqlite3.Connection:
        """The connection for the file as it is now (call with `_use` held), tried again when
        a writer finishing changed the file meanwhile (`readonly.settled`)."""
        return readonly.settled(
            self.source_path, self._connection_now, known=lambda: self._fingerprint
        )

    def _connection_now(self) -> sqlite3.Connection:
        self._revalidate()
        held = self._connection
        if held and held[0] == self._generation:
            return held[1]
        if held:
            held[1].close()
        try:
            conn = self.connect()
        except readonly.LedgerUnavailable:
            self._checked_in = None  # a next try stats the file again
            raise
        self._connection, self._policy = (self._generation, conn), None
        return conn

    def _release(self) -> None:
        """After a query (with `_use` held): a `mode=ro` connection is not kept, because an
        idle reader holding the WAL open stops Capsem from removing -wal/-shm at shutdown."""
        if self._closed or self._state.mode == "ro":
            held, self._connection = self._connection, None
            if held:
                held[1].close()

    def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with self._use:
            return self._run_held(fn)

    def _run_held(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """`fn` on the connection (call with `_use` held)."""
        if self._closed:
            raise readonly.LedgerUnavailable("evicted", self.source_path, "database was unmounted")
        try:
            conn = self._current_connection()
            # The connection serves requests of any actor.
            self._policy = redaction.apply_policy(conn, self._policy, self.kind)
            return fn(conn)
        finally:
            self._release()

    def _inline_eligible(self, fn: Callable) -> bool:
        """Datasette's own queries (one statement under its time limit, or a PRAGMA) of a
        request without SQL of its own, on a small file: handing each to a SQL thread and
        back costs more CPU than the query (a table page's ~100 queries on a 0.5 MB ledger:
        ~10 ms of handoffs against ~1 ms of SQL; plain Datasette pays it too)."""
        state = self._state
        return (
            self._inline
            and inline_queries.get()
            and getattr(fn, "__module__", "").startswith("datasette.")
            and state.size + (state.wal_size or 0) <= INLINE_MAX_BYTES
        )

    def _run_inline(self, fn: Callable[[sqlite3.Connection], Any]) -> tuple[bool, Any]:
        """(True, result) if `fn` ran here and now; (False, None) if a SQL thread is on the
        connection (a cancelled request's query may still be running): never wait for it."""
        if not self._use.acquire(blocking=False):
            return False, None
        spent = 0.0

        def timed(conn: sqlite3.Connection) -> Any:  # the query, not the connecting
            nonlocal spent
            # Wall time: thread_time() is a system call (a point where a busy machine
            # preempts the thread); the threshold is far above a preemption's few ms.
            started = time.perf_counter()
            try:
                return fn(conn)
            finally:
                spent = time.perf_counter() - started

        try:
            return True, self._run_held(timed)
        finally:
            self._use.release()
            if spent > INLINE_SLOW_SECONDS:
                self._slow_queries += 1
                self._inline = self._slow_queries < INLINE_SLOW_STRIKES

    async def execute_fn(self, fn: Callable[[sqlite3.Connection], Any]):
        if self.ds.executor is None:
            return self._run(fn)
        if self._queue is None:
            self._queue = asyncio.Lock()
        if not self._queue.locked() and self._inline_eligible(fn):
            ran, result = self._run_inline(fn)
            if ran:
                return result
        async with self._queue:
            # The request's secret policy lives in a contextvar; carry it into the thread.
            context = contextvars.copy_context()
            return await asyncio.get_event_loop().run_in_executor(
                self.ds.executor, context.run, self._run, fn
            )

    # -- facet counts, once per file version ---------------------------------------------------

    def _facet_key(self, sql: str, params: Any, custom_time_limit: Any) -> Hashable | None:
        """The key of a facet count (Datasette's ColumnFacet, ArrayFacet and DateFacet
        statements, run with the facet time limit) or of a facet suggestion (run with the
        suggestion time limit) or a table page's row count (`TABLE_COUNT`, no time limit of
        its own) of a file no writer holds, else None. A key's first part says which:
        "count", "suggest" or "rows"."""
        if self._state.mode not in ("immutable", "gz"):
            return None
        if custom_time_limit is None:
            if not sql.startswith(TABLE_COUNT) or "group by" in sql.lower():
                return None
            # A table page's count of its rows; "rows-of": a count of a statement's rows (a
            # facet suggestion's), which Datasette does not expect to be interrupted.
            kind = "rows-of" if sql.startswith(TABLE_COUNT + "(") else "rows"
        elif custom_time_limit == self.ds.setting("facet_time_limit_ms"):
            if "group by" not in sql.lower():
                return None
            kind = "count"
        elif custom_time_limit == self.ds.setting("facet_suggest_time_limit_ms"):
            kind = "suggest"
        else:
            return None
        values = tuple(sorted(params.items())) if isinstance(params, dict) else tuple(params or ())
        policy = (redaction.policy.get(), redaction.hide_free_text.get())
        return (kind, file_fingerprint(self.source_path), sql, values, policy)

    async def execute(
        self,
        sql,
        params=None,
        truncate=False,
        custom_time_limit=None,
        page_size=None,
        log_sql_errors=True,
    ):
        key = self._facet_key(sql, params, custom_time_limit) if not truncate else None
        if key is None:
            results = await super().execute(
                sql, params, truncate, custom_time_limit, page_size, log_sql_errors
            )
            return _suggestable(sql, results)
        held = self._facets.get(key)
        if held is not None:
            self._facets.move_to_end(key)
            if isinstance(held, Exception):  # a suggestion that failed: not suggested, as before
                raise type(held)(*held.args)
            return held
        if self._state.size >= BIG_LEDGER_BYTES and key[0] != "rows-of":  # in the background
            self._count_later(key, sql, params, custom_time_limit)
            counting = facets_counting.get()
            if counting is not None and key[0] in ("count", "rows"):
                counting.append(key)
            raise QueryInterrupted(sqlite3.OperationalError("being counted"), sql, params)
        try:
            self._ran(key)
            results = await super().execute(sql, params, False, custom_time_limit, page_size)
        except (QueryInterrupted, sqlite3.OperationalError) as error:
            if key[0] == "suggest":
                self._keep(key, _bare(error))
            elif isinstance(error, QueryInterrupted):
                self._count_later(key, sql, params, custom_time_limit)
            raise
        self._keep(key, results)
        return results

    def _ran(self, key: Hashable) -> None:
        if key[0] == "count":
            self.facet_runs += 1
        elif key[0] in ("rows", "rows-of"):
            self.row_count_runs += 1
        else:
            self.suggestion_runs += 1

    def _keep(self, key: Hashable, results: Any) -> None:
        self._facets[key] = results
        self._facets.move_to_end(key)
        while len(self._facets) > FACET_RESULTS_KEPT:
            self._facets.popitem(last=False)

    def _count_later(self, key: Hashable, sql: str, params: Any, time_limit: int) -> None:
        """Run a facet count or suggestion in the background for the next view (in the
        request's context: its reader policy): a count left to the background or that overran
        the facet time limit, within the instance's SQL time limit; a suggestion within its
        own time limit (one that overruns it is kept as such: not suggested, as Datasette
        does)."""
        if key in self._facets_running:
            return
        suggestion = key[0] == "suggest"
        limit = time_limit if suggestion else self.ds.setting("sql_time_limit_ms")
        if key[0] in ("rows", "rows-of"):
            limit = max(limit, ROW_COUNT_LIMIT_MS)

        async def run() -> None:
            try:
                async with self._counting:  # one count at a time per file
                    self._ran(key)
                    found = await asyncio.to_thread(self._count_apart, sql, params, limit)
                self._keep(key, found)
            except sqlite3.OperationalError as error:
                if suggestion:  # what Datasette's own run would have met
                    interrupted = "interrupted" in str(error)
                    kept = QueryInterrupted(error, sql, params) if interrupted else error
                    self._keep(key, _bare(kept))
                else:  # a count over the SQL time limit too, or the file went: not kept
                    log.info("facet count of %s not kept", self.source_path, exc_info=True)
            except Exception:
                log.info("facet count of %s not kept", self.source_path, exc_info=True)
            finally:
                self._facets_running.pop(key, None)

        if self._counting is None:
            self._counting = asyncio.Lock()
        self._facets_running[key] = asyncio.ensure_future(run())

    def _count_apart(self, sql: str, params: Any, limit_ms: int) -> Results:
        """A background facet count on a connection of its own (the file's one connection
        stays free for the pages meanwhile), under the reader policy of the request that
        asked (the context goes with the thread) and `limit_ms`."""
        conn = self.connect()
        try:
            redaction.apply_policy(conn, None, self.kind)
            with sqlite_timelimit(conn, limit_ms):
                cursor = conn.execute(sql, params or {})
                return Results(cursor.fetchall(), False, cursor.description)
        finally:
            conn.close()

    async def _execute_fn(self, fn: Callable[[sqlite3.Connection], Any]):
        """Datasette 1.0's `execute()` reads through `_execute_fn`, not `execute_fn`: both
        come here, to this file's one connection and the request's secret policy."""
        return await self.execute_fn(fn)

    async def execute_write_fn(self, fn, block=True):
        raise ReadOnlyDatabaseError("Capsem files are never opened for writing")

    async def columns_read(self, sql: str) -> list[tuple[str, str, str]]:
        """(table, column, kind) of the columns `sql` would read that are not shown raw."""

        def probe(conn: sqlite3.Connection):
            try:
                return redaction.columns_read(conn, sql, self.kind)
            finally:
                redaction.apply_policy(conn, None, self.kind)  # what `_policy` says it enforces

        return await self.execute_fn(probe)

    # -- schema -------------------------------------------------------------------------------

    async def ledger_schema(self) -> LedgerSchema:
        """Tables and columns of the file, re-read only when the file changed."""
        changed = (
            not self._checked_this_request()
            and file_fingerprint(self.source_path) != self._fingerprint
        )
        if self._schema is None or changed or self._schema_generation != self._generation:
            self._schema = await self.execute_fn(read_shared_schema)  # revalidates first
            self._schema_generation = self._generation
        return self._schema

    # -- lifecycle ----------------------------------------------------------------------------

    def shrink(self) -> None:
        """Free the connection's page cache (`PRAGMA shrink_memory`) while it sits idle:
        about half of SQLite's heap per mounted ledger (the rest is its parsed schema and
        prepared statements, which a next visit would pay to rebuild). Skipped while a query
        runs; the next query reads its pages again from the OS's cache."""
        if self._use.acquire(blocking=False):
            try:
                held = self._connection
                if held is not None and not self._closed:
                    held[1].execute("PRAGMA shrink_memory")
            except sqlite3.Error:
                pass  # only memory: the next query sees the file's state anyway
            finally:
                self._use.release()

    def disconnect(self) -> None:
        """Close the idle connection, keeping the mount: SQLite's prepared statements (a table
        page's ~100, ~0.34 MB; most are Datasette's facet suggestions, one per column) and
        parsed schema go with it, and the next query opens a new connection. Skipped while a
        query runs."""
        if self._use.acquire(blocking=False):
            try:
                held, self._connection = self._connection, None
                if held:
                    held[1].close()
            finally:
                self._use.release()

    def close(self) -> None:
        """Close the connection now, or when the query using it finishes."""
        self._closed = True
        if self._use.acquire(blocking=False):
            try:
                self._release()
            finally:
                self._use.release()
