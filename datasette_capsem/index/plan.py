"""Which ledger files the index reads, and under which session: aliases and forks.

Each ledger FILE is indexed once (spec §2.2: an upgraded persistent VM is known under two ids);
a fork's file is read with its parent's attached, so its copied rows count once (spec §1.3).
See `index/service.py` for how a refresh uses the plan.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from datasette_capsem.catalog import Session
from datasette_capsem.config import qualify
from datasette_capsem.index import store


def stat_ledger(path: Path | str) -> tuple[tuple, store.Fingerprint | None]:
    """(file identity, fingerprint) without opening the ledger. The identity is the inode, so
    two paths of one file are one file; a file that cannot be stat'ed is known by its path."""
    try:
        stat = os.stat(path)
    except OSError:
        return ("path", str(path)), None
    identity = ("inode", stat.st_dev, stat.st_ino)
    try:
        wal = os.stat(f"{path}-wal")
        return identity, (stat.st_size, stat.st_mtime_ns, wal.st_size, wal.st_mtime_ns)
    except OSError:
        return identity, (stat.st_size, stat.st_mtime_ns, None, None)


@dataclass(frozen=True)
class Parent:
    """The ledger a fork was copied from, as the refresh resolved it."""

    session_id: str  # the id the parent's file is indexed under
    ledger_path: Path
    fingerprint: store.Fingerprint | None

    @property
    def key(self) -> str:
        """What the fork's figures depend on while the parent was read."""
        return f"{self.session_id}\x1f{self.ledger_path}"

    @property
    def unreadable_key(self) -> str:
        """What they depend on while the parent could not be read: also its content."""
        return f"{self.key}\x1f{self.fingerprint}"


@dataclass
class FilePlan:
    """The catalog's ledgers, one owner per file, and each owner's fork parent."""

    owners: dict[str, Session] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # other id -> owner id
    fingerprints: dict[str, store.Fingerprint | None] = field(default_factory=dict)
    parents: dict[str, Parent] = field(default_factory=dict)


def _owner_rank(session: Session) -> tuple:
    """Which of the ids naming one file keeps its facts: the current route id (the session
    with a registry entry, spec §2.2), else one not marked as another id of the same VM."""
    return (
        session.registry_entry is None,
        session.same_vm_as is not None,
        session.kind == "index_only",
        session.id,
    )


def forked_from(session: Session) -> str | None:
    """What the session says it was forked from (registry, else main.db), or None."""
    entry = session.registry_entry or {}
    row = session.main_row or {}
    for value in (entry.get("forked_from"), entry.get("source_image"), row.get("forked_from")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _resolve(
    text: str, sessions: dict[str, Session], named: dict[str, list[Session]], home: str = ""
):
    """A session of the same home by id, else by name (as `capsem resume` does, spec §2.3);
    None if unknown or if the name is ambiguous."""
    found = sessions.get(qualify(home, text) if home else text)
    if found is not None:
        return found
    candidates = [s for s in named.get(text, []) if s.home == home]
    if len(candidates) > 1:
        candidates = [s for s in candidates if s.registry_entry is not None]
    return candidates[0] if len(candidates) == 1 else None


def plan_files(sessions: dict[str, Session], stats: Mapping[Path, tuple] | None = None) -> FilePlan:
    """Group the catalog's ledgers by file, pick each file's owner and each fork's parent.
    `stats`: `stat_ledger` of ledgers already stat'ed (the index's watch), not stat'ed again."""
    plan = FilePlan()
    by_file: dict[tuple, list[Session]] = {}
    file_of: dict[str, tuple] = {}
    known = stats or {}
    for session in sessions.values():
        location = session.ledger_location  # a string: no Path per ledger per refresh
        if location is None:
            continue
        found = known.get(Path(location)) if known else None
        identity, fingerprint = found if found is not None else stat_ledger(location)
        by_file.setdefault(identity, []).append(session)
        file_of[session.id] = identity
        plan.fingerprints[session.id] = fingerprint
    owner_of_file: dict[tuple, str] = {}
    for identity, group in by_file.items():
        owner, *others = sorted(group, key=_owner_rank)
        plan.owners[owner.id] = owner
        owner_of_file[identity] = owner.id
        plan.aliases.update({other.id: owner.id for other in others})
    named: dict[str, list[Session]] = {}
    for session in sessions.values():
        if session.name:
            named.setdefault(session.name, []).append(session)
    parent_ids: dict[str, str] = {}
    for owner_id, owner in plan.owners.items():
        text = forked_from(owner)
        parent = _resolve(text, sessions, named, owner.home) if text else None
        if parent is None or parent.id not in file_of:
            continue
        identity = file_of[parent.id]
        if identity == file_of[owner_id]:
            continue  # names its own file
        parent_id = owner_of_file[identity]
        parent_ids[owner_id] = parent_id
        plan.parents[owner_id] = Parent(parent_id, parent.ledger_path, plan.fingerprints[parent.id])
    for owner_id in sorted(plan.parents):
        # A cycle (A forked from B forked from A) would leave the shared rows to nobody:
        # the lowest id of the cycle keeps all of its rows.
        seen, current = [owner_id], parent_ids.get(owner_id)
        while current is not None and current not in seen:
            seen.append(current)
            current = parent_ids.get(current)
        if current is not None and current == owner_id:
            keeper = min(seen)
            plan.parents.pop(keeper, None)
            parent_ids.pop(keeper, None)
    return plan
