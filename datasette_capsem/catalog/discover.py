"""Find session directories in every layout Capsem has used (spec §1, §1.5, §1.6)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
LEGACY_ID_RE = re.compile(r"^(\d{8})-(\d{6})-[0-9a-f]{4}$")
PROFILE_RUN_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z][A-Za-z0-9_]*)*-\d+$")
FAILED_MARK = "-failed-"
# What the catalog keeps of a registry entry (`RegistryEntry.raw`, a session's
# `registry_entry`): the fields something reads (its creation time; index/plan.py's fork
# parent). A whole entry (asset pins, profile, hashes) is ~2 KB, and a machine can have a
# thousand persistent VMs: 2.3 MB kept for nothing.
REGISTRY_FIELDS = ("created_at", "forked_from", "source_image")


@dataclass(frozen=True)
class SessionDir:
    """A directory that holds (or held) one session's ledger."""

    id: str
    kind: str
    path: Path
    ledger_path: Path | None
    writer_wal: float  # mtime of a non-empty -wal, 0.0 when none
    failed_at: str | None = None


@dataclass(frozen=True)
class RegistryEntry:
    name: str
    id: str
    session_dir: Path | None
    raw: dict[str, Any]  # its REGISTRY_FIELDS


def legacy_id_time(value: str) -> str | None:
    """`YYYYMMDD-HHMMSS-xxxx` ids encode their UTC creation time."""
    match = LEGACY_ID_RE.match(value)
    if not match:
        return None
    try:
        moment = datetime.strptime(match.group(1) + match.group(2), "%Y%m%d%H%M%S")
    except ValueError:
        return None
    return moment.replace(tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def ledger_in(directory: Path) -> tuple[Path | None, float]:
    """The ledger file of a session dir, and the mtime of a writer's WAL beside it (0.0: none)."""
    for name in ("session.db", "session.db.gz"):
        candidate = directory / name
        if candidate.is_file() or (candidate.exists() and not candidate.is_dir()):
            return candidate, writer_wal(directory / "session.db-wal")
    return None, 0.0


def writer_wal(wal: Path) -> float:
    """The mtime of a non-empty `-wal` (rows a writer committed may be only there, spec §4.7),
    else 0.0. An empty one (with a 32 KiB `-shm`) is what any `mode=ro` reader leaves beside
    a finished ledger, Capsem's own scripts included: not a writer."""
    try:
        found = wal.stat()
    except OSError:
        return 0.0
    return found.st_mtime if found.st_size > 0 else 0.0


def _subdirs(parent: Path) -> list[Path]:
    try:
        with os.scandir(parent) as entries:
            # Sorted as strings: comparing 10,000 Paths costs ~0.1 s, strings a millisecond.
            found = sorted(e.path for e in entries if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    return [Path(path) for path in found]


def _run_session_dir(path: Path) -> SessionDir:
    ledger, wal = ledger_in(path)
    name = path.name
    if FAILED_MARK in name:
        original, stamp = name.split(FAILED_MARK, 1)
        return SessionDir(original, "failed", path, ledger, wal, legacy_id_time(stamp))
    kind = (
        "ephemeral" if UUID_RE.match(name) else "run" if PROFILE_RUN_RE.match(name) else "ephemeral"
    )
    return SessionDir(name, kind, path, ledger, wal)


def scan_run_sessions(run_dir: Path) -> list[SessionDir]:
    return [_run_session_dir(path) for path in _subdirs(run_dir / "sessions")]


def scan_persistent(run_dir: Path) -> list[SessionDir]:
    found = []
    for path in _subdirs(run_dir / "persistent"):
        ledger, wal = ledger_in(path)
        found.append(SessionDir(path.name, "persistent", path, ledger, wal))
    return found


def scan_legacy(capsem_home: Path) -> list[SessionDir]:
    """0.x dirs under `<home>/sessions/`; only those that still hold a ledger count."""
    found = []
    for path in _subdirs(capsem_home / "sessions"):
        ledger, wal = ledger_in(path)
        if ledger is None:
            continue
        kind = "legacy_gz" if ledger.suffix == ".gz" else "legacy"
        found.append(SessionDir(path.name, kind, path, ledger, wal))
    return found


def _entry_id(name: str, entry: dict[str, Any]) -> str:
    """Spec §2.2 `persistent_entry_vm_id`: id, else the dir's basename, else the name."""
    if isinstance(entry.get("id"), str) and entry["id"]:
        return entry["id"]
    session_dir = entry.get("session_dir")
    if isinstance(session_dir, str) and session_dir.strip("/"):
        return Path(session_dir).name
    return name


def _contained_dir(value: Any, run_dir: Path) -> Path | None:
    """A registry `session_dir`, accepted only inside run_dir/persistent (never elsewhere)."""
    if not isinstance(value, str) or not value:
        return None
    persistent = (run_dir / "persistent").resolve()
    candidate = Path(value).resolve()
    if candidate.parent == persistent:
        return candidate
    # A home that moved keeps absolute paths of its old place; match by basename.
    fallback = persistent / Path(value).name
    return fallback if fallback.is_dir() else None


def read_registry(run_dir: Path) -> tuple[list[RegistryEntry], str | None]:
    """Parse persistent_registry.json leniently; returns entries and a problem, if any."""
    path = run_dir / "persistent_registry.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [], None
    except (OSError, ValueError) as error:
        return [], f"{path} cannot be read: {error}"
    vms = document.get("vms") if isinstance(document, dict) else None
    if not isinstance(vms, dict):
        return [], f"{path} has no 'vms' object"
    entries = []
    for name, entry in sorted(vms.items()):
        if not isinstance(entry, dict):
            continue
        entries.append(
            RegistryEntry(
                name=str(entry.get("name") or name),
                id=_entry_id(name, entry),
                session_dir=_contained_dir(entry.get("session_dir"), run_dir),
                raw={key: entry[key] for key in REGISTRY_FIELDS if key in entry},
            )
        )
    return entries, None
