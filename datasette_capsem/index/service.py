"""The cross-session index as a service: incremental refresh, background thread, lookups.

A refresh stats every on-disk ledger (two `stat` calls each) and re-reads only those whose
size or mtime, or their WAL's, changed since they were indexed. Pages never read ledgers or
the index per request: they use `snapshot()`, an in-memory copy of the per-session figures
that is replaced whole after each refresh that changed something.

Each ledger FILE is indexed once. Several catalog sessions can name one file: an upgraded
persistent VM is known under its current route id and under its old, name-keyed main.db id
(spec §2.2). The file's facts are stored under one owner (the current route id: the session
with a registry entry) and the other ids are recorded as aliases of it.

A fork's ledger starts as a copy of its parent's (spec §1.3). The fork's facts leave out the
rows whose event_id (or, without one, row identity) is also in its `forked_from` parent's
ledger, resolved through the catalog by id and then by unique name, so each copied row counts
once, for the parent, and an id lookup of a copied row points at the parent. main.db's rollup
of a fork counts the whole file, so the fork's whole-file totals are kept beside (`file_totals`)
for the session list's rollup comparison.

Refresh and forks: the rows left out are those present in the parent's file when the fork is
read. A parent writes new rows with new event_ids, which can never be in the fork's copy, so
the fork is NOT re-read when the parent's ledger merely grows: it is re-read when its own file
changes, or when the parent it depends on changes identity (another session or file, or gone).
If the parent named could not be read, the fork's figures include the copied rows (recorded in
`ledgers.inherited_problem`) and the fork is re-read as soon as the parent's file changes.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import marshal
import os
import sqlite3
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from datasette_capsem.catalog import Catalog, CatalogSnapshot
from datasette_capsem.checks import runner
from datasette_capsem.config import Settings
from datasette_capsem.index import fts, parallel, store, verdicts
from datasette_capsem.index.notify import DirectoryNotifier
from datasette_capsem.index.plan import FilePlan, plan_files, stat_ledger
from datasette_capsem.memory import (
    CANONICAL,
    CompactRow,
    PackedRows,
    RowFile,
    StoredBytes,
    compact_rows,
    is_packed,
    packed_rows,
    release_memory,
    stored_bytes,
    trim_malloc,
    unpack_row,
)
from datasette_capsem.sqlfiles import load_sql

Progress = Callable[[int, int], None]
COMMIT_EVERY_SECONDS = 2.0  # readers see a long first build fill in as it goes (each
# commit also flushes the full-text index's pending terms as a new segment, merged later: every
# half second, a 10,000-session build wrote ~200 commits)
LOOKUP_LIMIT = 1000
FINDING_HITS = 100  # sessions listed per finding kind (the list filtered by kind has them all)
PARTIAL_RELOAD = 200  # a refresh that changed at most this many sessions reloads only theirs
# A refresh that read this many ledgers hands freed memory back to the OS; the full collection
# that takes (0.17 s with 10,000 sessions in memory) is not worth it after a few.
RELEASE_AFTER_LEDGERS = 50
TRIM_AFTER_LEDGERS = 5_000
# Between full refreshes the background thread watches the home by stat alone (the catalog's
# fingerprint, then two stats per ledger) and refreshes at once when something changed, so a
# new session or a changed ledger is in the list and in search within a second. The watch
# waits at least WATCH_SECONDS, longer if a round of stats costs more than WATCH_DUTY of the
# time (a huge home on a busy machine), but never more than WATCH_MAX_SECONDS.
WATCH_SECONDS = 0.25
WATCH_DUTY = 0.1
WATCH_MAX_SECONDS = 0.5
# Where the OS tells of changes (index/notify.py) a change wakes the watch at once; while a
# writer keeps writing, rounds of watching and refreshing take at most EVENT_DUTY of the time.
EVENT_DUTY = 0.5
# ...and the rounds of stats, which cost 6-9 % of a core at 10,000 sessions, only run every
# EVENTS_FALLBACK_SECONDS: a safety net for a change no event announced.
EVENTS_FALLBACK_SECONDS = 2.0


@dataclass(frozen=True)
class IndexSnapshot:
    """What the index knew at one moment: per-session ledger figures and daily usage."""

    generation: int = 0
    # session id -> its ledger file's figures (`load_totals`), held packed and kept in a file
    # of the cache dir like the verdicts (memory.PackedRows: an int each, ~400 bytes a row as
    # a compact row); a fork's row, with its whole file's totals as `file_totals`, whole
    ledgers: dict[str, dict[str, Any]] = field(default_factory=PackedRows)
    # session id -> its (day, provider, input tokens, output tokens, cost) rows, marshalled
    # into one bytes object (a list of tuples costs three times as much) kept in a file of the
    # cache dir (memory.StoredBytes: an int each): `days_of` reads them
    daily_usage: dict[str, bytes | int] = field(default_factory=StoredBytes)
    aliases: dict[str, str] = field(default_factory=dict)  # id -> id its file is indexed under
    # session id -> its stored quick-check verdict (verdicts.py), for every checked session
    checks: dict[str, dict[str, Any]] = field(default_factory=PackedRows)  # held packed
    # the sessions of `ledgers` whose row has a problem (their files could not be read)
    unreadable: frozenset[str] = frozenset()

    @cached_property
    def covered(self) -> frozenset[str]:
        """Sessions whose ledgers were read without a problem, alias ids of their files
        included (the lookup answers for the file under its owner's id); once per snapshot."""
        unreadable = self.unreadable
        covered = {sid for sid in self.ledgers if sid not in unreadable}
        aliases = {alias for alias, owner in self.aliases.items() if owner in covered}
        return frozenset(covered | aliases)

    @property
    def problems(self) -> int:
        """Ledgers that could not be read."""
        return len(self.unreadable)

    def days_of(self, session_id: str) -> list[tuple]:
        """A session's daily usage rows (day, provider, input, output tokens, cost)."""
        usage = self.daily_usage
        packed = usage.bytes_of(session_id) if isinstance(usage, StoredBytes) else None
        if packed is None and not isinstance(usage, StoredBytes):
            packed = usage.get(session_id)
        return marshal.loads(packed) if packed is not None else []

    def for_session(self, session_id: str) -> dict[str, Any] | None:
        """The indexed row of a session's ledger file, also for an alias id of that file (a
        new mapping each time: `held_for_session` is what the snapshot holds)."""
        held = self.held_for_session(session_id)
        return unpack_row(held) if is_packed(held) else held

    def held_for_session(self, session_id: str) -> Any:
        """The indexed row of a session's ledger file as the snapshot holds it (packed: the
        same object until the row changes, what the session list compares and keeps)."""
        row = dict.get(self.ledgers, session_id)
        if row is None and session_id in self.aliases:
            row = dict.get(self.ledgers, self.aliases[session_id])
        return row


@dataclass
class RefreshReport:
    """What one refresh did; `indexed` lists the sessions whose ledgers were read."""

    indexed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # sessions whose verdict was (re)computed
    problems: dict[str, str] = field(default_factory=dict)
    unchanged: int = 0
    total: int = 0
    seconds: float = 0.0


class IndexService:
    """One per Datasette instance (and per CLI run); safe to call from any thread."""

    def __init__(self, settings: Settings, catalog: Catalog):
        self.settings = settings
        self.catalog = catalog
        self.path = store.index_path(settings.cache_dir)
        self._refresh_lock = threading.Lock()
        self._snapshot: IndexSnapshot | None = None
        self._load_lock = threading.Lock()
        self._loading = threading.Lock()  # held while the stored figures are read
        self.finding_hits = FINDING_HITS
        # The findings page's reads, by the index file's stat when they were read.
        self._findings: tuple[tuple, list[dict[str, Any]]] | None = None
        self._unreadable: tuple[tuple, list[dict[str, Any]]] | None = None
        self._loader: threading.Thread | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._notifier: DirectoryNotifier | None = None  # the background thread's, closed by it
        self._progress = (0, 0)
        self._phase = "changed ledgers read"
        self._refreshing = False
        self._last: dict[str, Any] = {}
        # (catalog snapshot, digest of the ledger stats) of the last refresh (`_watch`): the
        # stats themselves (a key and two tuples per ledger, ~20 MB at 30,000) are not kept
        self._watched: tuple | None = None
        self._watch_seconds = 0.0  # what the last round of watching stats cost
        self._left: tuple | None = None  # the index file's stat after the last refresh
        self._uncovered: tuple[tuple, list] | None = None  # (key, uncovered_ledgers())
        self._named: Any = None  # the catalog snapshot whose names the index last stored
        # Called after every refresh, in the refreshing thread (e.g. to rebuild the session
        # list there rather than in the next request).
        self.after_refresh: list[Callable[[], None]] = []

    # -- refresh ------------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create the file so Datasette can mount it before the first refresh finishes."""
        store.connect_writer(self.path).close()

    def record_error(self, message: str) -> None:
        self._last = {**self._last, "error": message}

    def record_current(self) -> None:
        """The periodic full refresh found nothing to do without reading (`may_have_changed`):
        the index is as current as a refresh would have left it, now."""
        self._last = {**self._last, "at": time.time(), "error": None}

    def refresh(
        self, progress: Progress | None = None, watched: tuple | None = None
    ) -> RefreshReport:
        """Bring the index up to date with the ledgers on disk; one refresh at a time.
        `watched` is what `changed_since_refresh` just saw, if it was asked."""
        with self._refresh_lock:
            self._refreshing = True
            try:
                # Taken before reading: a change while reading is seen by the next watch.
                self._left = None
                watched = watched or self._watch()
                report = self._refresh(progress)
                self._watched = watched
                self._left = _written_key(self.path)
            except BaseException as error:
                if isinstance(error, (sqlite3.Error, OSError)):
                    self.record_error(str(error))
                raise
            finally:
                self._refreshing = False
        self._last = {
            "at": time.time(),
            "seconds": report.seconds,
            "error": None,
            "indexed": len(report.indexed),
            "removed": len(report.removed),
            "checked": len(report.checked),
        }
        for listener in self.after_refresh:
            listener()
        if len(report.indexed) >= RELEASE_AFTER_LEDGERS:
            release_memory()
        elif report.total >= TRIM_AFTER_LEDGERS:
            # Even with nothing to do, a refresh of a big home built and dropped its plan and
            # stats (tens of MB at 30,000 ledgers), which glibc keeps resident untrimmed.
            trim_malloc()
        return report

    def _refresh(self, progress: Progress | None) -> RefreshReport:
        started = time.perf_counter()
        sessions = self.catalog.snapshot().sessions
        # The ledgers stat'ed again (the watch keeps one number of them, not a dict)
        plan = plan_files(sessions)
        wanted = plan.owners
        report = RefreshReport(total=len(wanted))
        conn = store.connect_writer(self.path)
        try:
            stored = store.stored_fingerprints(conn)
            todo = self._changed(plan, stored, report)
            report.removed = sorted(set(stored) - set(wanted))
            for session_id in report.removed:
                store.forget(conn, session_id)
            unchecked, removed_checks = self._checks_wanted(conn, sessions, plan)
            if todo or unchecked:
                store.cache_for_writes(conn)
            runner.new_run()  # the rule book of this refresh, taken once (index/verdicts.py)
            self._index_all(conn, todo, report, progress, unchecked)
            aliases_changed = store.replace_aliases(conn, plan.aliases)
            catalog = self.catalog.snapshot()
            if catalog is not self._named:  # names and kinds change only with a rescan
                store.update_names(conn, ((s.name, s.kind, sid) for sid, s in wanted.items()))
            conn.commit()
            self._check_all(conn, list(unchecked.values()), progress, report)
            self._named = catalog
            report.seconds = time.perf_counter() - started
            store.set_meta(conn, last_refresh_at=time.time(), last_refresh_seconds=report.seconds)
            conn.commit()
        finally:
            conn.close()
        changed = {*report.indexed, *report.removed, *report.checked, *removed_checks}
        if aliases_changed or self._snapshot is None or len(changed) > PARTIAL_RELOAD:
            self._snapshot = self._load_snapshot()
        elif changed:
            self._snapshot = self._reload(changed)
        return report

    def _checks_wanted(self, conn, sessions: dict, plan: FilePlan) -> tuple[dict, list[str]]:
        """The sessions whose ledger file or main.db row changed since their stored verdict
        (verdicts.py), as {id: (session, fingerprint, signature)} in catalog order, and the
        sessions gone since, whose stored verdicts this forgets.

        The stored verdicts' inputs are compared as they are read (`store.stored_checks`),
        not kept between refreshes: at 100,000 sessions their hashes alone held ~8 MB for
        the life of the process, to save reading 100,000 short rows (~0.2 s) per refresh."""
        current: set[str] = set()  # sessions whose stored verdict is of their current inputs
        gone = []
        for session_id, known in store.stored_checks(conn):
            session = sessions.get(session_id)
            if session is None:
                gone.append(session_id)
            elif known == store.check_key(*self._check_inputs(session, plan)):
                current.add(session_id)
        for session_id in gone:
            store.forget_check(conn, session_id)
        todo = {}
        for session_id, session in sessions.items():
            if session_id not in current:
                todo[session_id] = (session, *self._check_inputs(session, plan))
        return todo, gone

    @staticmethod
    def _check_inputs(session, plan: FilePlan) -> tuple:
        """(ledger fingerprint, row signature): what a session's verdict is computed from."""
        fingerprint = plan.fingerprints.get(session.id) if session.has_ledger else None
        # kept on the session object while its row is unchanged (row_signature)
        return fingerprint, verdicts.row_signature(session)

    def _write_check(self, conn, job: tuple, checked, report: RefreshReport) -> None:
        session, fingerprint, signature = job
        described = {
            "session_id": session.id,
            "home": session.home,
            "session_name": session.name,
            "kind": session.kind,
            "created_at": session.created_at,
        }
        store.write_check(conn, described, fingerprint, signature, checked)
        report.checked.append(session.id)

    def _check_all(self, conn, todo: list, progress, report: RefreshReport) -> None:
        """Run the quick check profile on the sessions `_checks_wanted` found and the ledger
        reads did not check on the way (aliases of a file, unchanged ledgers whose main.db row
        changed, sessions without a ledger, ledgers that could not be opened)."""
        sessions = self.catalog.snapshot().sessions
        self._progress, self._phase = (0, len(todo)), "sessions checked"
        last_commit = time.monotonic()
        # Many (a first build): checked in worker processes, in order (index/parallel.py).
        checks = parallel.check_sessions([session for session, _, _ in todo], self.settings)
        for done, (job, checked) in enumerate(zip(todo, checks, strict=True), start=1):
            self._write_check(conn, job, checked, report)
            last_commit = self._step_done(conn, last_commit, done, len(todo), progress)
        if self.catalog.snapshot() is not self._named:
            store.update_check_names(
                conn, ((s.name, s.kind, s.created_at, sid) for sid, s in sessions.items())
            )

    def _changed(self, plan: FilePlan, stored: dict, report: RefreshReport) -> list:
        todo = []
        for session_id, session in plan.owners.items():
            fingerprint = plan.fingerprints.get(session_id)
            parent = plan.parents.get(session_id)
            current = (
                ("",) if parent is None else (parent.key, parent.unreadable_key)
            )  # the unreadable key only matches while the parent's file is unchanged
            known = stored.get(session_id)
            path = session.ledger_location
            if known is not None and any(
                known == store.ledger_key(path, fingerprint, key) for key in current
            ):
                report.unchanged += 1
            elif fingerprint is not None:
                todo.append((session, fingerprint, parent))
        return todo

    def _index_all(
        self, conn, todo: list, report: RefreshReport, progress, unchecked: dict
    ) -> None:
        """Read the changed ledgers and write their facts; a ledger whose owner's verdict is
        wanted too (`unchecked`) is quick-checked on the same connection as it is read, and
        leaves `unchecked` once its verdict is written."""
        self._progress, self._phase = (0, len(todo)), "changed ledgers read"
        last_commit = time.monotonic()
        settings = self.settings
        # Many ledgers are read in worker processes, each written here in plan order.
        reads = parallel.read_ledgers(
            [(s, parent, settings if s.id in unchecked else None) for s, _, parent in todo],
            settings.cache_dir,
        )
        for done, (job, (read, index_ms)) in enumerate(zip(todo, reads, strict=True), start=1):
            session, fingerprint, parent = job
            parent_key = ""
            if parent is not None:
                parent_key = parent.unreadable_key if read.inherited_problem else parent.key
            ledger = {
                "session_id": session.id,
                "home": session.home,
                "session_name": session.name,
                "kind": session.kind,
                "path": session.ledger_path,
                "era": read.era,
                "fingerprint": fingerprint,
                "index_ms": index_ms,
                "inherited_from": parent.session_id if parent else None,
                "inherited_problem": read.inherited_problem,
                "parent_key": parent_key,
            }
            store.write_ledger(conn, ledger, read.facts, read.problem)
            if read.checked is not None:
                self._write_check(conn, unchecked.pop(session.id), read.checked, report)
            report.indexed.append(session.id)
            if read.problem:
                report.problems[session.id] = read.problem
            last_commit = self._step_done(conn, last_commit, done, len(todo), progress)

    def _step_done(self, conn, last_commit: float, done: int, total: int, progress) -> float:
        """After one ledger or session: commit every COMMIT_EVERY_SECONDS (readers see a long
        first build fill in), report progress; the time of the last commit."""
        if time.monotonic() - last_commit > COMMIT_EVERY_SECONDS:
            conn.commit()
            last_commit = time.monotonic()
        self._progress = (done, total)
        if progress:
            progress(done, total)
        return last_commit

    def _watch(self) -> tuple[CatalogSnapshot, int]:
        """What a refresh depends on, by stat alone: the catalog's scan (rescanned if its
        fingerprint changed) and each ledger file's identity and fingerprint (a session dir
        without one is looked in again: its session.db may have been created since), as
        one number. Nothing per ledger is kept, nor made beyond its stat: a round that
        built a `Path` and a dict entry per ledger made ~25 MB of objects at 30,000 ledgers
        every round, whose scattered survivors kept that memory with the process."""
        started = time.perf_counter()
        # Not throttled: a request may have looked a moment before the change being watched.
        self.catalog.refresh(check_now=True)
        snapshot = self.catalog.snapshot()
        digest = 0
        recheck = self.catalog.recheck_ledger
        for session in snapshot.sessions.values():
            if not session.has_ledger:
                if session.dir_location is None:  # vacuumed: nowhere to look
                    continue
                recheck(session)
            location = session.ledger_location
            if location is not None:
                digest = hash((digest, stat_ledger(location)))
        self._watch_seconds = time.perf_counter() - started
        return snapshot, digest

    def may_have_changed(self) -> bool:
        """Whether the periodic full refresh may find anything the watch did not: only if
        the index file is not as this process's last refresh left it (another process
        wrote it, or that refresh failed). A full refresh of an unchanged home of 100,000
        sessions took ~1 s of CPU every `index_refresh_seconds` and its temporary objects
        (~20 MB) left a few MB behind each time, among the requests' own."""
        return self._left is None or self._left != _written_key(self.path)

    def changed_since_refresh(self) -> tuple | None:
        """What the home looks like now, if a session came or went or a ledger file changed
        since the last refresh (to hand to `refresh`); else None."""
        watched = self._watch()
        known = self._watched
        if known is None or watched[0] is not known[0] or watched[1] != known[1]:
            return watched
        return None

    def watched_directories(self) -> set[str]:
        """Where a change may matter to the index: the homes' layout dirs and each session's
        dir (its ledger and -wal are written there), for `DirectoryNotifier`: as strings,
        the sessions' own (a `Path` each cost ~700 bytes: 20 MB at 30,000 dirs, held for
        as long as they are watched). Made anew on each call (the background thread asks
        once per catalog scan): the notifier keeps what it watches."""
        snapshot = self.catalog.snapshot()
        dirs = {os.fspath(path) for path in self.catalog.layout_dirs()}
        for session in snapshot.sessions.values():
            folder = session.dir_location
            if folder is None and session.has_ledger:
                folder = os.path.dirname(session.ledger_location)
            if folder is not None:
                dirs.add(folder)
        return dirs

    def watch_pause(self) -> float:
        """How long the background thread waits between two rounds of watching."""
        return min(max(WATCH_SECONDS, self._watch_seconds / WATCH_DUTY), WATCH_MAX_SECONDS)

    # -- the in-memory copy -------------------------------------------------------------------

    def _load_snapshot(self) -> IndexSnapshot:
        generation = (self._snapshot.generation + 1) if self._snapshot else 1
        with store.reading(self.path) as conn:
            if conn is None:
                return IndexSnapshot(generation=generation)
            sql = functools.partial(load_sql, store.__package__)
            ledgers, unreadable, checks = _read_rows(
                conn,
                sql("load_totals"),
                sql("load_file_totals"),
                sql("load_checks"),
                kept=self._kept_rows(),
            )
            usage: dict[str, list[tuple]] = {}
            for row in conn.execute(sql("load_daily_usage")):
                usage.setdefault(row[0], []).append(tuple(row[1:]))
            aliases = dict(conn.execute(sql("load_aliases")).fetchall())
        usage = _packed_days(usage, *self._kept_days())
        if self._snapshot is not None:  # unchanged rows stay the same objects (see _same)
            ledgers = _same(self._snapshot.ledgers, ledgers)
            checks = _same(self._snapshot.checks, checks)
        return IndexSnapshot(
            generation=generation,
            ledgers=ledgers,
            daily_usage=usage,
            aliases=aliases,
            checks=checks,
            unreadable=frozenset(unreadable),
        )

    def _reload(self, changed: set[str]) -> IndexSnapshot:
        """The current snapshot with the rows of `changed` sessions read again (the others
        are kept: reloading 10,000 sessions' rows costs 0.1-0.2 s)."""
        old = self._snapshot or IndexSnapshot()
        ledgers, usage = PackedRows(old.ledgers), StoredBytes(old.daily_usage)
        checks = PackedRows(old.checks)
        for rows in (ledgers, usage, checks):
            for session_id in changed:
                rows.pop(session_id, None)
        params = {"ids": json.dumps(sorted(changed))}
        with store.reading(self.path) as conn:
            if conn is None:
                return IndexSnapshot(generation=old.generation + 1)
            sql = functools.partial(load_sql, store.__package__)
            read = sql("load_totals_of"), sql("load_file_totals_of"), sql("load_checks_of")
            changed_ledgers, unreadable, changed_checks = _read_rows(
                conn, *read, params, self._kept_rows()
            )
            ledgers.update(changed_ledgers)
            checks.update(changed_checks)
            days: dict[str, list[tuple]] = {}
            for row in conn.execute(sql("load_daily_usage_of"), params):
                days.setdefault(row[0], []).append(tuple(row[1:]))
            usage.update(_packed_days(days, *self._kept_days()))
        return IndexSnapshot(
            generation=old.generation + 1,
            ledgers=ledgers,
            daily_usage=usage,
            aliases=old.aliases,
            checks=checks,
            unreadable=(old.unreadable - changed) | unreadable,
        )

    def _kept_rows(self) -> tuple[tuple[RowFile | None, dict | None], ...]:
        """Where the ledgers' figures and the stored verdicts are kept (memory.RowFile),
        and the current ones of each."""
        old = self._snapshot
        cache = self.settings.cache_dir
        return (
            (RowFile.for_dir(cache, "ledger figures"), old.ledgers if old else None),
            (RowFile.for_dir(cache, "verdicts"), old.checks if old else None),
        )

    def _kept_days(self) -> tuple[RowFile | None, dict | None]:
        """Where the daily usage is kept (memory.RowFile), and the current one."""
        old = self._snapshot
        return (
            RowFile.for_dir(self.settings.cache_dir, "daily usage"),
            old.daily_usage if old else None,
        )

    def snapshot(self, wait: bool = True) -> IndexSnapshot:
        """The latest in-memory figures (read from disk once if no refresh ran yet).
        `wait=False` (a request): never read them here (100,000 sessions' figures take
        seconds): an empty snapshot (generation 0) while a thread reads them."""
        if self._snapshot is None:
            if not wait:
                self._load_soon()
                return IndexSnapshot()
            # One read at a time: a second reader waits for the first's figures rather than
            # reading its own copy beside them (100,000 sessions' rows, twice, at once).
            with self._loading:
                if self._snapshot is None:
                    try:
                        loaded = self._load_snapshot()
                    except sqlite3.Error:
                        return IndexSnapshot()
                    with self._load_lock:
                        if self._snapshot is None:  # a refresh may have set a newer one
                            self._snapshot = loaded
        return self._snapshot

    def prepare(self) -> None:
        """Before the background thread's first refresh: the stored figures read and, if
        there are any, the listeners run (the session list built), one after the other.
        Run beside that refresh's own reads (what was stored, every session's row
        signature), the three made their temporary objects at once: a peak of ~100 MB at
        100,000 sessions, and the long-lived objects made meanwhile, scattered among them,
        kept most of it with the process. A home without an index yet is built at once.
        The catalog's first scan comes first too (the figures are keyed by its ids)."""
        self.catalog.snapshot()
        snapshot = self.snapshot()
        if snapshot.ledgers or snapshot.checks:
            for listener in self.after_refresh:
                listener()

    def _load_soon(self) -> None:
        """Read the stored figures in a thread (once), then tell the listeners."""

        def load() -> None:
            if self.snapshot().generation:
                for listener in self.after_refresh:
                    listener()

        with self._load_lock:
            if self._loader is None or not self._loader.is_alive():
                self._loader = threading.Thread(target=load, name="capsem-index-load", daemon=True)
                self._loader.start()

    # -- the API other engines use ------------------------------------------------------------

    def lookup(self, value: str, limit: int = LOOKUP_LIMIT) -> list[dict]:
        """Where a trace, turn, event, call or message id occurs, across all indexed ledgers.

        A row a fork copied from its parent is the parent's (`copied_from` None); the fork's
        copy is listed too, with `copied_from` set to the parent's id."""
        with store.reading(self.path) as conn:
            if conn is None:
                return []
            rows = conn.execute(
                load_sql(store.__package__, "lookup"), {"value": value, "limit": limit}
            )
            return [dict(row) for row in rows]

    def search_text(
        self,
        query: str,
        filters: fts.TextFilters | None = None,
        *,
        limit: int = 50,
        offset: int = 0,
    ) -> fts.TextResult:
        """Ranked full-text hits across every indexed ledger (masked text, see index/text.py).
        A session filter naming an alias id searches the file it shares with its owner.
        Raises fts.QuerySyntaxError for a query FTS5 cannot read."""
        filters = self._owners_of(filters)
        with store.reading(self.path) as conn:
            if conn is None:
                fts.to_fts(query)  # a bad query is still a bad query
                return fts.TextResult()
            return fts.search(conn, query, filters, limit=limit, offset=offset)

    def _owners_of(self, filters: fts.TextFilters | None) -> fts.TextFilters:
        """The filters with each session id an alias of its owner's (the file they share)."""
        filters = filters or fts.TextFilters()
        if filters.sessions:
            aliases = self.snapshot().aliases
            owners = tuple(dict.fromkeys(aliases.get(s, s) for s in filters.sessions))
            filters = replace(filters, sessions=owners)
        return filters

    def text_sessions(
        self, query: str, filters: fts.TextFilters | None = None
    ) -> fts.SessionCounts:
        """The sessions full-text hits are in, with their hit counts (most first); a session
        filter naming an alias id searches its owner's file, as `search_text` does."""
        filters = self._owners_of(filters)
        with store.reading(self.path) as conn:
            if conn is None:
                fts.to_fts(query)  # a bad query is still a bad query
                return fts.SessionCounts()
            return fts.session_counts(conn, query, filters)

    def findings(self, hits: int | None = None) -> list[dict[str, Any]]:
        """Each finding kind of the stored quick-check verdicts, most severe and widest first:
        {kind, severity, title, sessions, rows, hits: [{session_id, ..., rows, tables}]},
        each kind's newest `hits` sessions, newest first (verdicts.py); `sessions` counts
        them all. Read once per change of the index file, not per request."""
        hits = self.finding_hits if hits is None else hits
        key = ("findings", hits, _file_key(self.path))
        known = self._findings
        if known is not None and known[0] == key:
            return copy.deepcopy(known[1])
        with store.reading(self.path) as conn:
            if conn is None:
                return []
            kinds = [
                {**dict(row), "hits": []}
                for row in conn.execute(load_sql(store.__package__, "findings_summary"))
            ]
            by_kind = {(k["kind"], k["severity"]): k for k in kinds}
            sql = load_sql(store.__package__, "findings_sessions")
            for row in conn.execute(sql, {"limit": hits}):
                found = by_kind.get((row["kind"], row["severity"]))
                if found is not None:
                    found["hits"].append(dict(row))
            unreadable = [
                dict(row)
                for row in conn.execute(load_sql(store.__package__, "unreadable_sessions"))
            ]
        self._findings = (key, kinds)
        self._unreadable = (key, unreadable)
        return copy.deepcopy(kinds)

    def unreadable(self) -> list[dict[str, Any]]:
        """Sessions whose stored verdict is 'unreadable', newest first, with the reason
        (read with `findings`)."""
        self.findings()
        known = self._unreadable
        return copy.deepcopy(known[1]) if known is not None else []

    def security(
        self,
        since: str | None = None,
        until: str | None = None,
        category: str | None = None,
        limit: int = 500,
    ) -> dict[str, list[dict[str, Any]]]:
        """What policy stopped or flagged across sessions (`policy_events`), for days from
        `since` to `until` (YYYY-MM-DD, inclusive) and one category or all: per day and
        category, per session and category, and per subject."""
        parts = ("by_day", "by_session", "subjects")
        params = {"since": since, "until": until, "category": category, "limit": int(limit)}
        with store.reading(self.path) as conn:
            if conn is None:
                return {part: [] for part in parts}
            return {
                part: [
                    dict(row)
                    for row in conn.execute(load_sql(store.__package__, f"security_{part}"), params)
                ]
                for part in parts
            }

    def covered_sessions(self) -> set[str]:
        """Sessions whose ledgers the index covers (`IndexSnapshot.covered`)."""
        return set(self.snapshot().covered)

    def uncovered_ledgers(self, catalog: CatalogSnapshot) -> list[tuple[str, Path]]:
        """(session id, ledger path) of the catalog's ledgers the index does not cover (new,
        or unreadable), for a search to scan directly; once per catalog scan and index
        generation, not per request (10,000 sessions)."""
        snapshot = self.snapshot()
        key = (id(catalog), catalog.scanned_at, snapshot.generation)
        known = self._uncovered
        if known is None or known[0] != key:
            covered = snapshot.covered
            newest = sorted(
                (s for s in catalog.sessions.values() if s.ledger_path is not None),
                key=lambda s: (s.created_at or "", s.id),
                reverse=True,
            )  # newest first: a scan within a budget looks at the likeliest first
            found = [(s.id, s.ledger_path) for s in newest if s.id not in covered]
            known = self._uncovered = (key, found)
        return known[1]

    def freshness(self) -> dict[str, Any]:
        """How current the index is, for pages and JSON (no I/O)."""
        last = self._last
        done, total = self._progress
        snapshot = self._snapshot or IndexSnapshot()
        age = time.time() - last["at"] if last.get("at") else None
        return {
            "path": str(self.path),
            "ready": self._snapshot is not None,
            "refreshing": self._refreshing,
            "progress": {"done": done, "total": total, "phase": self._phase}
            if self._refreshing
            else None,
            "last_refresh_at": _iso(last.get("at")),
            "last_refresh_seconds": last.get("seconds"),
            "age_seconds": None if age is None else round(age, 1),
            "last_error": last.get("error"),
            "ledgers_indexed": len(snapshot.ledgers),
            "ledgers_with_problems": snapshot.problems,
            "sessions_checked": len(snapshot.checks),
            "refresh_interval_seconds": self.settings.index_refresh_seconds,
            "generation": snapshot.generation,
        }

    # -- background ---------------------------------------------------------------------------

    def start_background(self) -> None:
        """Off the request path: refresh now, then as soon as the home changes (watched by
        stat), and in full every `index_refresh_seconds` in any case."""
        interval = self.settings.index_refresh_seconds
        if interval <= 0 or self._thread is not None:
            return
        self._notifier = DirectoryNotifier()
        self._thread = threading.Thread(
            target=_background_loop,
            args=(weakref.ref(self), self._stop, self._notifier, interval),
            name="capsem-index-refresh",
            daemon=True,
        )
        self._thread.start()

    def stop_background(self, wait: float = 60.0) -> None:
        """Stop the background thread and wait up to `wait` seconds for its round to end."""
        self._stop.set()
        if self._notifier is not None:
            self._notifier.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(wait)


def _background_loop(
    ref: weakref.ref, stop: threading.Event, notifier: DirectoryNotifier, interval: float
) -> None:
    """Holds the service only weakly, so a discarded Datasette lets the thread end."""
    next_full = 0.0
    prepared = False
    scanned = None  # the catalog scan whose directories the notifier watches
    try:
        while not stop.is_set():
            service = ref()
            if service is None:
                return
            began = time.monotonic()
            added = 0
            # A failure is recorded in freshness()["last_error"]; the next round retries.
            with contextlib.suppress(sqlite3.Error, OSError):
                if not prepared:
                    prepared = True
                    service.prepare()
                    began = time.monotonic()
                watched = service.changed_since_refresh()
                if watched or (began >= next_full and service.may_have_changed()):
                    service.refresh(watched=watched or None)
                elif began >= next_full:  # the index is current: as a refresh would find
                    service.record_current()
                if began >= next_full:
                    next_full = began + interval
                # A dir watched only now may have changed since this round's stats: one
                # more round at once sees that, and events see everything after. The same
                # dirs as last round (the same catalog scan) are not handed over again: a
                # set of 30,000 made and compared every round, for nothing.
                if service.catalog.snapshot() is not scanned:
                    scanned = service.catalog.snapshot()
                    added = notifier.watch(service.watched_directories())
            pause = service.watch_pause()
            if notifier.active and notifier.watching:
                pause = max(pause, EVENTS_FALLBACK_SECONDS)
            del service
            ended = time.monotonic()
            if added:
                continue
            if notifier.wait(pause):
                busy = ended - began
                stop.wait(max(0.0, ended + busy * (1 / EVENT_DUTY - 1) - time.monotonic()))
    finally:
        notifier.close()


def _read_rows(
    conn,
    totals: str,
    file_totals: str,
    checks: str,
    params: dict | None = None,
    kept: tuple = ((None, None), (None, None)),
) -> tuple[PackedRows, set[str], PackedRows]:
    """The index's per-session figures, the sessions among them whose ledger could not be
    read, and the stored verdicts. Both kinds of rows are held packed (memory.PackedRows),
    kept in files of the cache dir (`kept`: each kind's file and current rows); a fork's
    figures, with its whole file's totals as `file_totals`, are a compact row."""
    params = params or {}
    forks = {row["session_id"]: row for row in compact_rows(conn.execute(file_totals, params))}
    cursor = conn.execute(totals, params)
    problem = [d[0] for d in cursor.description].index("problem")
    unreadable: set[str] = set()

    def note(row) -> None:
        if row[problem]:
            unreadable.add(sys.intern(row[0]))

    ledgers = packed_rows(cursor, "session_id", *kept[0], each=note)
    layout: dict[str, int] | None = None
    for session_id, whole in forks.items():
        held = dict.get(ledgers, session_id)
        if held is None:
            continue
        row = unpack_row(held) if is_packed(held) else held
        if layout is None:  # one column index for every fork's row
            layout = {**row._columns, "file_totals": len(row._values)}
        ledgers[session_id] = CompactRow(layout, (*row._values, whole))
    # Verdicts, one per session (100,000 in a big home)
    return ledgers, unreadable, packed_rows(conn.execute(checks, params), "session_id", *kept[1])


def _packed_days(
    days: dict[str, list[tuple]], into: RowFile | None = None, previous: dict | None = None
) -> StoredBytes:
    """Each session's daily usage rows as one marshalled bytes object (IndexSnapshot), kept
    in `into` (equal to its `previous` one: in its place)."""
    return stored_bytes(
        ((sid, marshal.dumps(rows, CANONICAL)) for sid, rows in days.items()), into, previous
    )


def _same(old: dict[str, dict], new: dict[str, dict]) -> dict[str, dict]:
    """`new` with each row equal to its `old` one replaced by that object, so what is built
    from a row (the session list's, listing.py) is rebuilt only for rows that changed."""
    for key, row in dict.items(new):  # as held (a PackedRows row stays packed)
        known = dict.get(old, key)
        if known is not None and known == row:
            new[key] = known
    return new


def _file_key(path: Path) -> tuple:
    """What changes when the index database is written: its file's and its WAL's stat."""
    found = []
    for name in (path, Path(f"{path}-wal")):
        try:
            stat = name.stat()
        except OSError:
            found.append(None)
        else:
            found.append((stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def _written_key(path: Path) -> tuple:
    """`_file_key` with an empty -wal as none: a reader opening the file (`mode=ro`) creates
    an empty one, which is no write."""
    main, wal = _file_key(path)
    return main, wal if wal is not None and wal[1] > 0 else None


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
