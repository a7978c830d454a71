"""The session catalog: every session on the machine, from main.db, dirs and the registry.

Every page and command asks the catalog; nothing else scans the Capsem home. A rescan costs
one directory listing per layout plus one read of main.db, and happens only when a cheap
fingerprint (mtimes of the scanned dirs, main.db, its WAL and the registry) has changed.
"""

from __future__ import annotations

import difflib
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from datasette_capsem import readonly
from datasette_capsem.catalog import discover
from datasette_capsem.catalog.models import MainRow, Session
from datasette_capsem.config import Settings
from datasette_capsem.sqlfiles import load_sql

# Database names Datasette or this plugin already use; a session with such an id is served
# under a prefixed name instead.
RESERVED_DATABASE_NAMES = frozenset({"main", "index", "_internal", "_memory", "-", "static"})


def database_name(session_id: str) -> str:
    """The Datasette database name of a session: its id, unless that name is taken."""
    return f"session-{session_id}" if session_id in RESERVED_DATABASE_NAMES else session_id


@dataclass
class CatalogSnapshot:
    """One consistent view of the home, replaced whole on every rescan."""

    sessions: dict[str, Session] = field(default_factory=dict)
    main_db_path: Path | None = None
    main_db_problem: str | None = None
    registry_problem: str | None = None
    home_exists: bool = True
    scanned_at: float = 0.0

    @property
    def problems(self) -> list[str]:
        found = [self.main_db_problem, self.registry_problem]
        return [problem for problem in found if problem]


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


class Catalog:
    """Thread-safe, lazily refreshed view of all sessions in one Capsem home."""

    min_check_interval = 0.25  # seconds between fingerprint checks (a few stats each)

    def __init__(self, settings: Settings):
        self.settings = settings
        self._lock = threading.Lock()
        self._snapshot = CatalogSnapshot(scanned_at=0.0)
        self._fingerprint: tuple | None = None
        self._checked_at = 0.0

    # -- public API -------------------------------------------------------------------------

    def snapshot(self) -> CatalogSnapshot:
        """The current view, rescanning first if the home changed."""
        self.refresh()
        return self._snapshot

    def get(self, session_id: str) -> Session | None:
        return self.snapshot().sessions.get(session_id)

    def sessions(self) -> list[Session]:
        """Newest first."""
        return sorted(
            self.snapshot().sessions.values(),
            key=lambda s: (s.created_at or "", s.id),
            reverse=True,
        )

    def near_matches(self, text: str, limit: int = 5) -> list[Session]:
        """Sessions whose id or name looks like `text`, for 'did you mean' answers."""
        snapshot = self.snapshot()
        keys: dict[str, str] = {}
        for session in snapshot.sessions.values():
            keys[session.id] = session.id
            if session.name:
                keys.setdefault(session.name, session.id)
        lowered = text.lower()
        prefix = [sid for key, sid in keys.items() if lowered and key.lower().startswith(lowered)]
        close = difflib.get_close_matches(text, list(keys), n=limit, cutoff=0.6)
        ordered = list(dict.fromkeys(prefix[:limit] + [keys[key] for key in close]))
        return [snapshot.sessions[sid] for sid in ordered[:limit]]

    def recheck_ledger(self, session: Session) -> Session:
        """Look again for a ledger in a session's dir: a session.db created after the last
        scan changes no mtime the catalog watches (only the dir's own)."""
        if session.ledger_path is None and session.dir_path is not None:
            session.ledger_path, session.writer_wal = discover.ledger_in(session.dir_path)
        return session

    def database_name(self, session: Session) -> str:
        return database_name(session.id)

    def session_for_database(self, database_name: str) -> Session | None:
        session = self.get(database_name)
        if session is not None and self.database_name(session) == database_name:
            return session
        if database_name.startswith("session-"):
            candidate = self.get(database_name[len("session-") :])
            if candidate is not None and self.database_name(candidate) == database_name:
                return candidate
        return None

    def refresh(self, force: bool = False) -> bool:
        """Rescan if the fingerprint changed; returns whether a rescan happened."""
        now = time.monotonic()
        if not force and now - self._checked_at < self.min_check_interval:
            return False
        with self._lock:
            self._checked_at = now
            fingerprint = self._fingerprint_now()
            if not force and fingerprint == self._fingerprint:
                return False
            self._snapshot = self._scan()
            self._fingerprint = fingerprint
            return True

    # -- scanning ---------------------------------------------------------------------------

    def _fingerprint_now(self) -> tuple:
        settings = self.settings
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
        settings = self.settings
        snapshot = CatalogSnapshot(scanned_at=time.time())
        snapshot.home_exists = settings.capsem_home.is_dir() or settings.run_dir.is_dir()
        rows = self._read_main_db(snapshot)
        registry, snapshot.registry_problem = discover.read_registry(settings.run_dir)
        sessions: dict[str, Session] = {}
        self._add_dirs(sessions, registry)
        self._add_main_rows(sessions, rows)
        self._add_registry_only(sessions, registry)
        snapshot.sessions = sessions
        return snapshot

    def _read_main_db(self, snapshot: CatalogSnapshot) -> list[MainRow]:
        for candidate in self.settings.main_db_candidates:
            if not candidate.exists():
                continue
            snapshot.main_db_path = candidate
            try:
                conn = readonly.open_readonly(candidate, self.settings.cache_dir)
            except readonly.LedgerUnavailable as error:
                snapshot.main_db_problem = f"main.db: {error.detail} ({candidate})"
                return []
            try:
                cursor = conn.execute(load_sql(__package__, "main_sessions"))
                columns = {d[0]: i for i, d in enumerate(cursor.description)}
                return [MainRow(columns, row) for row in cursor]
            except sqlite3.DatabaseError as error:
                snapshot.main_db_problem = f"main.db has no readable sessions table: {error}"
                return []
            finally:
                conn.close()
        searched = ", ".join(str(path) for path in self.settings.main_db_candidates)
        snapshot.main_db_problem = f"main.db not found (looked in {searched})"
        return []

    def _add_dirs(self, sessions: dict[str, Session], registry: list[discover.RegistryEntry]):
        settings = self.settings
        by_dir = {entry.session_dir: entry for entry in registry if entry.session_dir}
        found = (
            discover.scan_run_sessions(settings.run_dir)
            + discover.scan_persistent(settings.run_dir)
            + discover.scan_legacy(settings.capsem_home)
        )
        for found_dir in found:
            entry = by_dir.get(found_dir.path.resolve())
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

    def _add_main_rows(self, sessions: dict[str, Session], rows: list[MainRow]):
        aliases = {s.same_vm_as: s.id for s in sessions.values() if s.same_vm_as}
        for row in rows:
            session_id = str(row.get("id"))
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
                    session.ledger_path, session.dir_path = current.ledger_path, current.dir_path
                sessions[session_id] = session
            session.main_row = row
            session.status = row.get("status")
            session.created_at = row.get("created_at") or session.created_at
            session.stopped_at = row.get("stopped_at")

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
                session.problems.append(
                    "registry entry's session_dir is missing or outside run/persistent"
                )
            sessions[entry.id] = session
