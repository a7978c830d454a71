"""The session catalog: every session of every home, from main.db, dirs and the registry.

Every page and command asks the catalog; nothing else scans a Capsem home. A rescan costs
one directory listing per layout plus one read of main.db, and happens only when a cheap
fingerprint (mtimes of the scanned dirs, main.db, its WAL and the registry) has changed.

`HomeCatalog` scans one home. `Catalog` is what everything else uses: for an unlabelled
instance it is that one home's catalog unchanged; for labelled homes it merges one
`HomeCatalog` per home, each session addressed `<label>--<id>` so no id shadows another, and
keeps a `HomeState` per label (a home that disappears is "unavailable since" the first scan
that missed it, and its sessions leave the list until it is back).
"""

from __future__ import annotations

import bisect
import difflib
import functools
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from datasette_capsem import readonly
from datasette_capsem.catalog import discover
from datasette_capsem.catalog.models import STOPPED_IN_ROW, MainRow, Session
from datasette_capsem.config import (
    Home,
    Settings,
    qualify,
    scan_homes_dir,
    split_qualified,
)
from datasette_capsem.memory import RowFile, RowPacker, is_packed, unpack_row
from datasette_capsem.sqlfiles import load_sql

# Database names Datasette or this plugin already use; a session with such an id is served
# under a prefixed name instead.
RESERVED_DATABASE_NAMES = frozenset({"main", "index", "_internal", "_memory", "-", "static"})


def database_name(session_id: str) -> str:
    """The Datasette database name of a session: its id, unless that name is taken."""
    return f"session-{session_id}" if session_id in RESERVED_DATABASE_NAMES else session_id


def session_database_name(session: Session) -> str:
    """A session's Datasette database name; in a labelled home `<label>--<name>`, its name by
    the rule above (so a session whose id is `main` never takes the home's `<label>--main`)."""
    if session.home:
        return qualify(session.home, database_name(session.short_id))
    return database_name(session.id)


def main_database_name(label: str) -> str:
    """The Datasette name of a labelled home's main.db (`main` for the one unlabelled home)."""
    return qualify(label, "main") if label else "main"


@dataclass
class HomeState:
    """What the list says about one labelled home."""

    label: str
    path: str
    available: bool = True
    unavailable_since: str | None = None  # ISO time of the first scan that missed it
    sessions: int = 0
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "path": self.path,
            "available": self.available,
            "unavailable_since": self.unavailable_since,
            "sessions": self.sessions,
            "problems": list(self.problems),
        }


def _lower(key: str) -> str:
    """`key` lowered, the same string when it has no capital (a uuid: no copy of it)."""
    lowered = key.lower()
    return key if lowered == key else lowered


class MatchKeys:
    """id, local id and name -> session id: what 'did you mean' compares, with the sorted and
    bucketed forms its prefix search and near-match comparison read."""

    def __init__(self, keys: dict[str, str]):
        self.keys = keys

    @cached_property
    def lowered(self) -> list[tuple[str, str]]:
        return sorted((_lower(key), key) for key in self.keys)

    @cached_property
    def by_start(self) -> dict[str, list[str]]:
        """The keys by their first two characters, lowered (NEAR_MATCH_SCAN)."""
        found: dict[str, list[str]] = {}
        for key in self.keys:
            found.setdefault(key[:2].lower(), []).append(key)
        return found


@dataclass
class CatalogSnapshot:
    """One consistent view of the home, replaced whole on every rescan."""

    sessions: dict[str, Session] = field(default_factory=dict)
    main_db_path: Path | None = None
    main_db_problem: str | None = None
    registry_problem: str | None = None
    home_exists: bool = True
    scanned_at: float = 0.0
    homes: dict[str, HomeState] = field(default_factory=dict)  # labelled homes only
    home_snapshots: dict[str, CatalogSnapshot] = field(default_factory=dict)
    by_local_id: dict[str, list[Session]] = field(default_factory=dict)
    home_problems: list[str] = field(default_factory=list)  # e.g. a homes_dir child left out
    _match_keys: dict[Any, MatchKeys] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )  # made per snapshot, never carried into a copy

    # What lookups by name and prefix read, made once per snapshot (a pass over 100,000
    # sessions per request otherwise): names to sessions, and sorted keys for prefixes.
    @cached_property
    def by_name(self) -> dict[str, list[Session]]:
        found: dict[str, list[Session]] = {}
        for session in self.sessions.values():
            if session.name:
                found.setdefault(session.name, []).append(session)
        return found

    @cached_property
    def id_keys(self) -> tuple[list[str], list[tuple[str, str]]]:
        """The ids, sorted, and (a home's local id, the session's id) sorted: ids by prefix
        (the ids' own strings: no tuple per session)."""
        local = {(s.short_id, s.id) for s in self.sessions.values() if s.short_id != s.id}
        return sorted(self.sessions), sorted(local)

    def with_id_prefix(self, prefix: str) -> list[Session]:
        """Sessions whose id (or local id) starts with `prefix`: a binary search."""
        ids, local = self.id_keys
        found: dict[str, Session] = {}
        at = bisect.bisect_left(ids, prefix)
        while at < len(ids) and ids[at].startswith(prefix):
            found[ids[at]] = self.sessions[ids[at]]
            at += 1
        at = bisect.bisect_left(local, (prefix, ""))
        while at < len(local) and local[at][0].startswith(prefix):
            found[local[at][1]] = self.sessions[local[at][1]]
            at += 1
        return list(found.values())

    def match_keys(self, shown: Callable[[str], str] | None = None) -> MatchKeys:
        """What 'did you mean' compares, names as `shown` makes them (masked for a reader who
        may not see them), made once per snapshot and way of showing."""
        found = self._match_keys.get(shown)
        if found is None:
            keys: dict[str, str] = {}
            for session in self.sessions.values():
                keys[session.id] = session.id
                if session.local_id:
                    keys.setdefault(session.local_id, session.id)
                if session.name:
                    keys.setdefault(shown(session.name) if shown else session.name, session.id)
            found = self._match_keys[shown] = MatchKeys(keys)
        return found

    @property
    def problems(self) -> list[str]:
        found = [self.main_db_problem, self.registry_problem]
        for label, home in self.home_snapshots.items():
            found += [f"{label}: {problem}" for problem in home.problems]
        return [problem for problem in found + self.home_problems if problem]


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


def _epoch_to_iso(value: Any) -> str | None:
    try:
        moment = datetime.fromtimestamp(int(str(value)), tz=timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return str(value) if value else None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _mtime_iso(path: Path) -> str | None:
    key = _stat_key(path)
    if key is None:
        return None
    return datetime.fromtimestamp(key[0] / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _SnapshotQueries:
    """What both catalogs answer from their current snapshot (`snapshot()`)."""

    def snapshot(self) -> CatalogSnapshot:
        raise NotImplementedError

    def get(self, session_id: str) -> Session | None:
        return self.snapshot().sessions.get(session_id)

    def sessions(self) -> list[Session]:
        """Newest first."""
        return sorted(
            self.snapshot().sessions.values(),
            key=lambda s: (s.created_at or "", s.id),
            reverse=True,
        )

    def near_matches(
        self, text: str, limit: int = 5, shown: Callable[[str], str] | None = None
    ) -> list[Session]:
        """Sessions whose id or name looks like `text`, for 'did you mean' answers. `shown`:
        a name as the reader sees it (masked), which is what is matched: matching the name
        as stored would confirm a masked part of it one character at a time."""
        return _near_matches(self.snapshot(), text, limit, shown)


class Catalog(_SnapshotQueries):
    """Thread-safe, lazily refreshed view of all sessions of the instance's homes."""

    def __init__(self, settings: Settings):
        self._interval = 1.0  # seconds between fingerprint checks
        self.settings = settings
        self.labelled = settings.labelled
        self._single = None if self.labelled else HomeCatalog(settings.home, settings.cache_dir)
        self._homes: dict[str, HomeCatalog] = {}
        self._states: dict[str, HomeState] = {}
        self._listing_problems: list[str] = []
        self._merged = CatalogSnapshot(scanned_at=0.0)
        self._merged_from: tuple = ()
        self._checked_at = 0.0
        self._lock = threading.Lock()

    @property
    def min_check_interval(self) -> float:
        return self._interval

    @min_check_interval.setter
    def min_check_interval(self, value: float) -> None:
        self._interval = value
        for home in ([self._single] if self._single else []) + list(self._homes.values()):
            home.min_check_interval = value

    def snapshot(self, wait: float | None = None) -> CatalogSnapshot:
        """The current view, rescanning first if a home changed. `wait` (seconds, one home):
        while another thread scans, wait at most that long, then answer the previous scan
        (None before the first: a request never waits out a scan of 100,000 sessions)."""
        if self._single is not None:
            return self._single.snapshot(wait)  # type: ignore[return-value]
        self.refresh()
        return self._merged

    def scan_soon(self) -> None:
        """Start the first scan in a thread (a server's start), so the first request finds it
        under way rather than doing it."""
        if self._single is not None and not self._single.scanned:
            threading.Thread(
                target=self._single.refresh, name="capsem-catalog-scan", daemon=True
            ).start()

    def recheck_ledger(self, session: Session) -> Session:
        return HomeCatalog.recheck_ledger(session)  # type: ignore[arg-type]

    def database_name(self, session: Session) -> str:
        return session_database_name(session)

    def session_for_database(self, name: str) -> Session | None:
        return _session_for_database(self.snapshot(), name)

    def home_state(self, label: str) -> HomeState | None:
        """A labelled home's state (None: no home has this label)."""
        return self.snapshot().homes.get(label)

    def main_db_path(self, label: str = "") -> Path | None:
        if self._single is not None and not self._single.scanned:
            # Before the first scan (the startup hook mounts main.db): where it is, not what
            # it holds; a scan of 100,000 sessions is not worth waiting for here.
            return self._single.main_db_location()
        snapshot = self.snapshot()
        found = snapshot.home_snapshots.get(label) if label else snapshot
        return found.main_db_path if found else None

    def layout_dirs(self) -> set[Path]:
        """The directories whose entries say which sessions exist, in every home."""
        if self._single is not None:
            return self._single.layout_dirs()
        found = {self.settings.homes_dir} if self.settings.homes_dir is not None else set()
        for home in list(self._homes.values()):
            found |= home.layout_dirs()
        return found

    def main_database_names(self) -> list[str]:
        """The Datasette names of every home's main.db."""
        if not self.labelled:
            return [main_database_name("")]
        return [main_database_name(label) for label in self.snapshot().homes]

    def refresh(self, force: bool = False, check_now: bool = False) -> bool:
        """Rescan what changed; returns whether anything was rescanned. `check_now` looks at
        the fingerprints even if they were looked at less than an interval ago."""
        if self._single is not None:
            return self._single.refresh(force, check_now)
        now = time.monotonic()
        if not (force or check_now) and now - self._checked_at < self._interval:
            return False
        with self._lock:
            self._checked_at = now
            self._update_homes()
            changed = [home.refresh(force) for home in self._homes.values()]
            key = tuple(
                (label, id(home._snapshot), self._states[label].available)
                for label, home in self._homes.items()
            ) + tuple(self._listing_problems)
            if key != self._merged_from:
                self._merged = self._merge()
                self._merged_from = key
            return any(changed)

    # -- labelled homes ---------------------------------------------------------------------

    def _update_homes(self) -> None:
        """Track the configured homes and the children of homes_dir now; a home seen once is
        kept, marked unavailable while its directory is missing."""
        homes = list(self.settings.homes)
        problems: list[str] = []
        if self.settings.homes_dir is not None:
            found, problems = scan_homes_dir(self.settings.homes_dir)
            taken = {home.label for home in homes}
            for home in found:
                if home.label in taken:
                    problems.append(
                        f"{home.capsem_home} is left out: the label {home.label!r} "
                        "is already a configured home"
                    )
                else:
                    homes.append(home)
        self._listing_problems = problems
        present = {home.label for home in homes}
        for home in homes:
            if home.label not in self._homes:
                catalog = HomeCatalog(home, self.settings.cache_dir)
                catalog.min_check_interval = 0.0  # this façade throttles
                self._homes[home.label] = catalog
                self._states[home.label] = HomeState(home.label, str(home.capsem_home))
        for label, catalog in self._homes.items():
            state = self._states[label]
            available = label in present and catalog.home.capsem_home.is_dir()
            if available:
                state.available, state.unavailable_since = True, None
            elif state.available:
                state.available, state.unavailable_since = False, _now_iso()

    def _merge(self) -> CatalogSnapshot:
        merged = CatalogSnapshot(scanned_at=time.time(), home_problems=list(self._listing_problems))
        for label in sorted(self._homes):
            state, home = self._states[label], self._homes[label]._snapshot
            if not state.available:
                state.sessions, state.problems = 0, []
                continue
            merged.home_snapshots[label] = home
            merged.sessions.update(home.sessions)
            state.sessions, state.problems = len(home.sessions), home.problems
        # Copies: a snapshot in use keeps the states it was built with.
        merged.homes = {label: replace(self._states[label]) for label in sorted(self._homes)}
        merged.home_exists = any(state.available for state in merged.homes.values())
        for session in merged.sessions.values():
            merged.by_local_id.setdefault(session.short_id, []).append(session)
        return merged


# Above this many keys, 'did you mean' compares a text with the keys that start with its
# first two characters only (a typo there is not suggested): difflib over 100,000 sessions'
# ids and names takes about a second per request.
NEAR_MATCH_SCAN = 5000


def _near_matches(
    snapshot: CatalogSnapshot, text: str, limit: int, shown: Callable[[str], str] | None = None
) -> list[Session]:
    """Sessions whose id or name (as `shown`) looks like `text`, for 'did you mean' answers."""
    match = snapshot.match_keys(shown)
    keys = match.keys
    lowered = text.lower()
    prefix = []
    if lowered:
        ordered = match.lowered
        at = bisect.bisect_left(ordered, (lowered, ""))
        while at < len(ordered) and len(prefix) < limit and ordered[at][0].startswith(lowered):
            prefix.append(keys[ordered[at][1]])
            at += 1
    compared = list(keys) if len(keys) <= NEAR_MATCH_SCAN else match.by_start.get(lowered[:2], [])
    close = difflib.get_close_matches(text, compared, n=limit, cutoff=0.6)
    ordered_ids = list(dict.fromkeys(prefix[:limit] + [keys[key] for key in close]))
    return [snapshot.sessions[sid] for sid in ordered_ids[:limit]]


def _session_for_database(snapshot: CatalogSnapshot, name: str) -> Session | None:
    sessions = snapshot.sessions
    session = sessions.get(name)
    if session is not None and session_database_name(session) == name:
        return session
    qualified = split_qualified(name) if snapshot.homes else None
    label, rest = qualified if qualified else ("", name)
    if rest.startswith("session-"):
        key = rest[len("session-") :]
        candidate = sessions.get(qualify(label, key) if label else key)
        if candidate is not None and session_database_name(candidate) == name:
            return candidate
    return None


class HomeCatalog(_SnapshotQueries):
    """Thread-safe, lazily refreshed view of all sessions in one Capsem home."""

    min_check_interval = 0.25  # seconds between fingerprint checks (a few stats each)
    # A first scan of a main.db bigger than this (about 3,000 sessions) is not waited for at
    # all (`snapshot(wait=...)`): it takes longer than any wait a request would make.
    first_scan_wait_up_to_bytes = 1 << 20

    def __init__(self, home: Home, cache_dir: Path):
        self.home = home
        self.cache_dir = cache_dir
        self._lock = threading.Lock()
        self._snapshot = CatalogSnapshot(scanned_at=0.0)
        self._fingerprint: tuple | None = None
        self._checked_at = 0.0
        # The last read of main.db and of the registry, by the stat of what they read: a new
        # session dir changes neither, and reading 10,000 main.db rows costs ~0.2 s.
        self._main_read: tuple[tuple, _MainRead] | None = None
        self._registry_read: tuple[tuple, tuple] | None = None

    # -- public API -------------------------------------------------------------------------

    def snapshot(self, wait: float | None = None) -> CatalogSnapshot | None:
        """The current view, rescanning first if the home changed. `wait`: see
        `Catalog.snapshot`."""
        if wait is not None:
            if not self.scanned and self._big_main_db():
                wait = 0  # a server's first scan of a big home: the page says it is reading
            if not self._lock.acquire(timeout=wait):  # another thread is scanning
                return self._snapshot if self.scanned else None
            self._lock.release()
        self.refresh()
        return self._snapshot

    @staticmethod
    def recheck_ledger(session: Session) -> Session:
        """Look again for a ledger in a session's dir: a session.db created after the last
        scan changes no mtime the catalog watches (only the dir's own)."""
        if session.ledger_path is None and session.dir_path is not None:
            session.ledger_path, session.writer_wal = discover.ledger_in(session.dir_path)
        return session

    def refresh(self, force: bool = False, check_now: bool = False) -> bool:
        """Rescan if the fingerprint changed; returns whether a rescan happened."""
        now = time.monotonic()
        if (
            not (force or check_now)
            and now - self._checked_at < self.min_check_interval
            and self.scanned  # before the first scan ends (another thread's), wait for it
        ):
            return False
        with self._lock:
            self._checked_at = now
            fingerprint = self._fingerprint_now()
            if not force and fingerprint == self._fingerprint:
                return False
            self._snapshot = self._scan()
            self._fingerprint = fingerprint
            return True

    @property
    def scanned(self) -> bool:
        return self._fingerprint is not None

    def _big_main_db(self) -> bool:
        """Whether main.db is too big for a request to wait for its first scan (a stat)."""
        found = self.main_db_location()
        key = _stat_key(found) if found is not None else None
        return key is not None and key[1] > self.first_scan_wait_up_to_bytes

    def main_db_location(self) -> Path | None:
        """The main.db a scan would read (the first candidate that exists), without reading it."""
        return next((p for p in self.home.main_db_candidates if p.exists()), None)

    def layout_dirs(self) -> set[Path]:
        """The directories whose entries say which sessions exist (and main.db's)."""
        home = self.home
        dirs = {
            home.capsem_home,
            home.capsem_home / "sessions",
            home.run_dir,
            home.run_dir / "sessions",
            home.run_dir / "persistent",
        }
        return dirs | {main_db.parent for main_db in home.main_db_candidates}

    # -- scanning ---------------------------------------------------------------------------

    def _fingerprint_now(self) -> tuple:
        settings = self.home
        watched = [
            settings.capsem_home,
            settings.capsem_home / "sessions",
            settings.run_dir / "sessions",
            settings.run_dir / "persistent",
            settings.run_dir / "persistent_registry.json",
        ]
        for main_db in settings.main_db_candidates:
            watched += [main_db, Path(f"{main_db}-wal")]
        return tuple(_stat_key(path) for path in watched)

    def _scan(self) -> CatalogSnapshot:
        settings = self.home
        snapshot = CatalogSnapshot(scanned_at=time.time())
        snapshot.home_exists = settings.capsem_home.is_dir() or settings.run_dir.is_dir()
        main = self._main_db()
        snapshot.main_db_path, snapshot.main_db_problem = main.path, main.problem
        registry, snapshot.registry_problem = self._registry()
        sessions: dict[str, Session] = {}
        self._add_dirs(sessions, registry)
        self._add_main_rows(sessions, main.rows)
        self._add_registry_only(sessions, registry)
        sessions = _labelled(sessions, settings.label) if settings.label else sessions
        snapshot.sessions = _keep_unchanged(self._snapshot.sessions, sessions)
        return snapshot

    def _main_db(self) -> _MainRead:
        """main.db's sessions rows, read again only if main.db or its -wal changed."""
        key = tuple(
            (_stat_key(path), _stat_key(Path(f"{path}-wal")))
            for path in self.home.main_db_candidates
        )
        if self._main_read is None or self._main_read[0] != key:
            self._main_read = (key, self._read_main_db())
        return self._main_read[1]

    def _read_main_db(self) -> _MainRead:
        for candidate in self.home.main_db_candidates:
            if not candidate.exists():
                continue
            try:
                conn = readonly.open_readonly(candidate, self.cache_dir)
            except readonly.LedgerUnavailable as error:
                return _MainRead(candidate, f"main.db: {error.detail} ({candidate})")
            try:
                rows = readonly.tolerant(conn, functools.partial(_main_rows, conn))
                return _MainRead(candidate, None, self._kept(rows))
            except sqlite3.DatabaseError as error:
                problem = f"main.db has no readable sessions table: {error}"
                return _MainRead(candidate, problem)
            finally:
                conn.close()
        searched = ", ".join(str(path) for path in self.home.main_db_candidates)
        return _MainRead(None, f"main.db not found (looked in {searched})")

    def _kept(self, rows: list[tuple[str, bytes | MainRow]]) -> list[int | bytes | MainRow]:
        """main.db's packed rows kept in a file of the cache dir (memory.RowFile), each
        row equal to the one its session had at the last scan in the same place."""
        store = RowFile.for_dir(self.cache_dir, "main.db rows")
        if store is None:
            return [row for _, row in rows]
        previous = {s.local_id or s.id: s._main for s in self._snapshot.sessions.values()}
        return [
            store.put(row, previous.get(session_id)) if type(row) is bytes else row
            for session_id, row in rows
        ]

    def _registry(self) -> tuple[list[discover.RegistryEntry], str | None]:
        """The registry's entries, parsed again only if it (or run/persistent, which its
        `session_dir`s are resolved against) changed."""
        run_dir = self.home.run_dir
        key = (
            _stat_key(run_dir / "persistent_registry.json"),
            _stat_key(run_dir / "persistent"),
        )
        if self._registry_read is None or self._registry_read[0] != key:
            self._registry_read = (key, discover.read_registry(run_dir))
        return self._registry_read[1]

    def _add_dirs(self, sessions: dict[str, Session], registry: list[discover.RegistryEntry]):
        settings = self.home
        by_dir = {entry.session_dir: entry for entry in registry if entry.session_dir}
        # Registry dirs are always in run/persistent (discover._contained_dir), and a scanned
        # dir is never a symlink: resolving the parent once resolves every dir in it.
        persistent = (settings.run_dir / "persistent").resolve() if by_dir else None
        found = (
            discover.scan_run_sessions(settings.run_dir)
            + discover.scan_persistent(settings.run_dir)
            + discover.scan_legacy(settings.capsem_home)
        )
        for found_dir in found:
            entry = None
            if persistent is not None and found_dir.kind == "persistent":
                entry = by_dir.get(persistent / found_dir.path.name)
            session_id = entry.id if entry else found_dir.id
            if session_id in sessions:  # a second failed dir of the same id
                session_id = found_dir.path.name
            session = Session(
                id=session_id,
                kind=found_dir.kind,
                ledger_path=found_dir.ledger_path,
                dir_path=found_dir.path,
                writer_wal=found_dir.writer_wal,
                created_at=discover.legacy_id_time(found_dir.id) or found_dir.failed_at,
            )
            if entry:
                session.name = entry.name
                session.registry_entry = entry.raw
                session.created_at = _epoch_to_iso(entry.raw.get("created_at"))
                if found_dir.id != session_id:
                    session.same_vm_as = found_dir.id
            elif found_dir.kind not in ("ephemeral", "failed") or not discover.UUID_RE.match(
                found_dir.id
            ):
                session.name = found_dir.id  # before 2026-06-26 the id was the name
            if session.created_at is None:
                session.created_at = _mtime_iso(found_dir.path)
            sessions[session_id] = session

    def _add_main_rows(self, sessions: dict[str, Session], rows: list[int | bytes | MainRow]):
        aliases = {s.same_vm_as: s.id for s in sessions.values() if s.same_vm_as}
        for packed in rows:
            row = unpack_row(packed) if is_packed(packed) else packed
            session_id = sys.intern(str(row.get("id")))  # the index's rows hold this string
            session = sessions.get(session_id)
            if session is None:
                kind = "persistent" if row.get("persistent") else "index_only"
                session = Session(id=session_id, kind=kind)
                if not discover.UUID_RE.match(session_id) and not discover.LEGACY_ID_RE.match(
                    session_id
                ):
                    session.name = session_id
                if session_id in aliases:  # the old, name-keyed id of an upgraded VM
                    current = sessions[aliases[session_id]]
                    session.same_vm_as = current.id
                    session.kind = "persistent"
                    session.dir_path, session.ledger_path = current.dir_path, current.ledger_path
                sessions[session_id] = session
            session.main_row = packed
            session.status = row.get("status")
            session.created_at = row.get("created_at") or session.created_at
            session.stopped_at = STOPPED_IN_ROW  # read from the row when asked (models.py)

    def _add_registry_only(
        self, sessions: dict[str, Session], registry: list[discover.RegistryEntry]
    ):
        for entry in registry:
            if entry.id in sessions:
                sessions[entry.id].name = sessions[entry.id].name or entry.name
                sessions[entry.id].registry_entry = entry.raw
                continue
            session = Session(id=entry.id, kind="persistent", name=entry.name)
            session.registry_entry = entry.raw
            session.created_at = _epoch_to_iso(entry.raw.get("created_at"))
            if entry.session_dir is None:
                session.problems = [
                    "registry entry's session_dir is missing or outside run/persistent"
                ]
            sessions[entry.id] = session


MAIN_ROWS_BATCH = 2000  # main.db rows packed at a time (what a read holds beside its result)


def _main_rows(conn: sqlite3.Connection) -> list[tuple[str, bytes | MainRow]]:
    """main.db's sessions rows (with their ids), packed (memory.RowPacker: about 160 bytes a row where a
    tuple of its values costs 640), a batch at a time: a whole read's raw rows (100,000
    tuples, 30 MB) never sit in memory together."""
    cursor = conn.execute(load_sql(__package__, "main_sessions"))
    columns: dict[str, int] = {}
    for i, d in enumerate(cursor.description):
        columns.setdefault(d[0], i)
    packer = RowPacker.for_layout(MainRow, columns)
    at = columns.get("id")
    rows: list[tuple[str, bytes | MainRow]] = []
    while batch := cursor.fetchmany(MAIN_ROWS_BATCH):
        ids = [str(row[at]) if at is not None else "None" for row in batch]
        if packer is None:  # past the packers a process keeps: whole rows
            rows += zip(ids, [MainRow(columns, tuple(row)) for row in batch], strict=True)
        else:
            rows += zip(ids, packer.pack(batch), strict=True)
    return rows


@dataclass(frozen=True)
class _MainRead:
    """What one read of a home's main.db found."""

    path: Path | None
    problem: str | None
    rows: list[int | bytes | MainRow] = field(default_factory=list)  # packed (_kept)


def _keep_unchanged(old: dict[str, Session], new: dict[str, Session]) -> dict[str, Session]:
    """`new` with every session equal to its previous scan's object replaced by that object:
    what is built from a session (index verdict signatures, the list's rows) is kept by
    identity, so a new session costs one session's work, not 10,000 comparisons of rows."""
    for session_id, session in new.items():
        known = old.get(session_id)
        if known is not None and known == session:
            new[session_id] = known
    return new


def _labelled(sessions: dict[str, Session], label: str) -> dict[str, Session]:
    """One home's sessions addressed `<label>--<id>` (their references too)."""
    found: dict[str, Session] = {}
    for session_id, session in sessions.items():
        session.home, session.local_id = label, session_id
        session.id = qualify(label, session_id)
        if session.same_vm_as:
            session.same_vm_as = qualify(label, session.same_vm_as)
        found[session.id] = session
    return found
