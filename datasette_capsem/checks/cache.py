"""Integrity reports of the sessions viewed lately, cached per file version, in memory and on
disk.

Built once per Datasette instance (`state.CapsemState.reports`); the overview, the trace page
and the event pages read the rule book's findings through it, so a view of an unchanged ledger
never runs the checks again.

Two tiers, one idea. `ReportCache` holds the reports of the sessions viewed lately in memory;
under it, `VersionedStore` keeps the reports of ledgers no writer holds in the plugin's cache dir
(never in the Capsem home), so a restarted server, a second server over the same cache, and the
index refresh (which runs the overview's quick profile on every session anyway,
`index/verdicts.py`) share them. A stored report is keyed by the ledger file's resolved path
(hashed into the file name) and the profile, and holds while its validator is unchanged: the
ledger's and its -wal's size and mtime, the main.db row, liveness, the database name its links
use, and the rule book's version (its SQL, JSON and code, and every registered check).

A server prunes the store after its first save and hourly: the reports of ledger files that
are gone (Capsem deletes a stopped ephemeral session's directory) and killed writers' leftovers.

Reports of live sessions are never stored: some checks read the clock (a `running` row whose
WAL is a day old), so those reports keep `max_age` in memory. A stopped session's report is a
function of its files and the rule book alone, and holds for as long as they do.

Stored reports are what the memory tier holds: the rule book's findings as computed, unmasked.
Pages mask what they render (`views/render.py`, `core_pages/secrets_guard.py`), so a stored report
reaches a masked reader exactly as a cached one does. Files are written 0600 under a 0700
directory, beside the index (which holds the ledgers' text itself).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import logging
import re
import sys
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path
from typing import Any

from datasette_capsem.checks.engine import all_checks
from datasette_capsem.checks.model import Check, Finding, Report, RowVerdict, RowVerdicts
from datasette_capsem.ledger import tables
from datasette_capsem.readonly import file_fingerprint
from datasette_capsem.versioned_store import (
    JSON_OBJECT,
    CachedEntry,
    Codec,
    StoreKey,
    VersionedStore,
)

log = logging.getLogger(__name__)

# A stopped session's quick report decodes to ~110 KB of Python (its findings), read back from
# the store in ~2 ms: 128 of them held up to 14 MB; 32 is the mounted ledgers' bound.
REPORT_CACHE_ENTRIES = 32
# Some checks read the clock (a `running` row whose WAL is a day old), so a live session's
# report is recomputed this often even when its file is unchanged.
REPORT_MAX_AGE_SECONDS = 300.0

STORE_DIRECTORY = "reports"  # under the plugin's cache dir
TRACE_STORE_DIRECTORY = "traces"  # beside it: trace answers (views/trace_cache.py)
# What the rule book is made of besides its registered checks: changing any of these files
# (an edited .sql, a new finding kind, the dialect) makes every stored report stale. Of
# `ledger/`, the modules the checks and their queries import (and the SQL `read_schema`
# runs); not `ledger/tables.py` as a file: it is mostly what pages draw (labels, lanes,
# spans), so an edit there made every stored report stale. What the checks take from it
# (each table's name and order, legacy mark, required columns and rollup sources) is in the
# digest instead (`RULE_BOOK_TABLE_FIELDS`; tests/test_build_checks.py records what the rule
# book reads of it).
RULE_BOOK_PARTS = (
    "checks",
    "queries",
    "findings.py",
    "sqlfiles.py",
    "ledger/__init__.py",
    "ledger/bodies.py",
    "ledger/dialect.py",
    "ledger/eras.py",
    "ledger/rollup.py",
    "ledger/schema.py",
    "ledger/sql",
)
RULE_BOOK_SUFFIXES = (".py", ".sql", ".json")
RULE_BOOK_TABLE_FIELDS = ("name", "legacy", "required_columns", "rollup")


def _table_facts() -> bytes:
    """The rule book's part of `ledger/tables.py`: RULE_BOOK_TABLE_FIELDS of every table, in
    order."""
    facts = [
        [repr(getattr(table, name)) for name in RULE_BOOK_TABLE_FIELDS] for table in tables.TABLES
    ]
    return repr(facts).encode()


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # object addresses differ from run to run


# -- what a report depends on --------------------------------------------------------------


def report_validator(session: Any, path: Path | str | None, database: str | None) -> tuple:
    """What a session's report depends on besides the clock and the rule book: the ledger's
    files (size and mtime of it and its -wal), liveness, the main.db row and the database name
    its links use. Take it before the checks run: a file that changes meanwhile then fails it."""
    files = file_fingerprint(path) if path is not None else None
    row = session.main_row
    return (files, session.live, tuple(dict(row).items()) if row is not None else None, database)


@functools.cache
def source_digest(parts: tuple[str, ...], suffixes: tuple[str, ...]) -> bytes:
    """A digest of this package's files under `parts` (files or directories) whose suffix is
    in `suffixes`: what a cached answer built by that code is valid for."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        base = root / part
        paths = [base] if base.is_file() else sorted(base.rglob("*"))
        for path in paths:
            if path.suffix in suffixes and path.is_file():
                digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.digest()


@functools.cache
def _module_digest(module_name: str) -> bytes:
    """A digest of the source file a check's class comes from (a plugin's, too)."""
    filename = getattr(sys.modules.get(module_name), "__file__", None)
    try:
        return hashlib.blake2b(Path(filename).read_bytes(), digest_size=16).digest()
    except (OSError, TypeError):
        return module_name.encode()


_versions: dict[tuple[int, ...], tuple[list[Check], str]] = {}


def rule_book_version(checks: list[Check] | None = None) -> str:
    """A digest of the rule book: its files, and each registered check's class, source file and
    configuration, so an edited rule, a new plugin or a removed one changes it."""
    checks = all_checks() if checks is None else checks
    key = tuple(id(check) for check in checks)
    held = _versions.get(key)
    if held is not None:
        return held[1]
    digest = hashlib.blake2b(source_digest(RULE_BOOK_PARTS, RULE_BOOK_SUFFIXES), digest_size=16)
    digest.update(_table_facts())
    for check in checks:
        kind = type(check)
        digest.update(f"{kind.__module__}.{kind.__qualname__}\0".encode())
        digest.update(_module_digest(kind.__module__))
        if dataclasses.is_dataclass(check):
            digest.update(_ADDRESS.sub("", repr(check)).encode("utf-8", "surrogatepass"))
    if len(_versions) >= 16:
        _versions.clear()
    # the checks are held with their digest, so their ids cannot be reused by other objects
    _versions[key] = (list(checks), digest.hexdigest())
    return _versions[key][1]


# -- how a report is written ---------------------------------------------------------------


def _encode_row_verdicts(verdicts: RowVerdicts) -> dict[str, Any]:
    """Each distinct verdict once, then runs of consecutive rows of one table with the same
    verdicts: a finding that fires on a million rows is one run."""
    palette: dict[RowVerdict, int] = {}
    runs: list[list[Any]] = []
    for (table, row_id), found in verdicts.rows().items():
        indexes = [palette.setdefault(verdict, len(palette)) for verdict in found]
        if runs and runs[-1][0] == table and runs[-1][1] == indexes:
            runs[-1][2].append(row_id)
        else:
            runs.append([table, indexes, [row_id]])
    verdicts_json = [[v.kind, v.severity, v.title, v.check] for v in palette]
    return {"verdicts": verdicts_json, "runs": runs}


def _decode_row_verdicts(data: dict[str, Any]) -> RowVerdicts:
    """The same RowVerdicts (rows, their order and each row's verdicts in order), rebuilt
    through its own constructor from one finding per verdict of each run."""
    palette = [RowVerdict(*(str(part) for part in verdict)) for verdict in data["verdicts"]]
    findings = []
    for table, indexes, row_ids in data["runs"]:
        for index in indexes:
            verdict = palette[index]
            findings.append(
                Finding(
                    kind=verdict.kind,
                    severity=verdict.severity,
                    count=len(row_ids),
                    title=verdict.title,
                    explanation="",
                    table=str(table),
                    check=verdict.check,
                    offending=tuple(row_ids),
                )
            )
    return RowVerdicts(findings)


REPORT_JSON = JSON_OBJECT
ROW_VERDICTS_JSON = Codec(encode=_encode_row_verdicts, decode=_decode_row_verdicts)


def save_report(
    store: VersionedStore,
    key: StoreKey,
    validator: Hashable,
    computed_at: float,
    report: Any,
    parts: dict[str, Hashable] | None = None,
    version: str | None = None,
) -> bool:
    """Store a report computed outside a `ReportCache` (the index refresh's quick one), under
    the current rule book (`version`: its `rule_book_version`, when the caller has it);
    `validator` (and `parts`, see `VersionedStore.save`) must have been taken before it ran.
    `report`: a `Report` (stored as its `to_json`, the text of its `to_dict`) or that dict."""
    entry = CachedEntry(validator, computed_at, report, timeless=True)
    try:
        encoded = report.to_json() if isinstance(report, Report) else None
    except (TypeError, ValueError) as error:  # not JSON: as `save` says of a dict
        log.info("report of %s not stored: %s", key.ledger, error)
        return False
    return store.save(key, entry, version or rule_book_version(), parts, encoded)


class ReportCache:
    """Integrity reports of the sessions viewed lately, one per (session id, profile).

    An entry holds while its validator (the ledger's size and mtime, its -wal's, the main.db
    row and liveness) is unchanged, and for a live session while it is younger than `max_age`.
    A missing report is read from the `store` when the caller gives its `StoreKey` (a stopped
    session), else computed, then stored. Concurrent views of a session whose report is missing
    share one run. Owned by one Datasette instance (its `CapsemState`), bounded to `size`
    entries, least recently used evicted first.
    """

    def __init__(
        self,
        size: int = REPORT_CACHE_ENTRIES,
        max_age: float = REPORT_MAX_AGE_SECONDS,
        store: VersionedStore | None = None,
    ):
        self.size, self.max_age, self.store = size, max_age, store
        self.runs = 0  # reports computed (each runs the whole profile once)
        self.hits = 0  # views answered from memory
        self.loaded = 0  # reports read from the store instead of computed
        self._entries: OrderedDict[Hashable, CachedEntry] = OrderedDict()
        self._running: dict[Hashable, tuple[Hashable, asyncio.Future]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def fresh(self, key: Hashable, validator: Hashable) -> CachedEntry | None:
        entry = self._entries.get(key)
        if entry is None or entry.validator != validator:
            return None
        if not entry.timeless and time.time() - entry.computed_at > self.max_age:
            return None
        self._entries.move_to_end(key)
        return entry

    async def get(
        self,
        key: Hashable,
        validator: Hashable,
        compute: Callable[[], Awaitable[Any]],
        stored: StoreKey | None = None,
    ) -> tuple[CachedEntry, bool]:
        """(entry, cached): the held or stored report if still valid, else one computed now
        (and stored when `stored` says where)."""
        entry = self.fresh(key, validator)
        if entry is not None:
            self.hits += 1
            return entry, True
        running = self._running.get(key)
        if running is None or running[0] != validator:
            task = asyncio.ensure_future(self._compute(key, validator, compute, stored))
            running = self._running[key] = (validator, task)
        # shield: a view that is cancelled (its client left) does not cancel the others' run
        entry, computed = await asyncio.shield(running[1])
        return entry, not computed

    async def _compute(self, key, validator, compute, stored) -> tuple[CachedEntry, bool]:
        try:
            store = self.store if stored is not None else None
            version = rule_book_version() if store is not None else ""
            entry = None
            if store is not None:
                entry = await asyncio.to_thread(store.load, stored, validator, version)
            computed = entry is None
            if entry is None:
                started = time.time()
                report = await compute()
                self.runs += 1
                entry = CachedEntry(validator, started, report, timeless=stored is not None)
                if store is not None:
                    await asyncio.to_thread(store.save, stored, entry, version)
                    store.prune_now_and_then()
            else:
                self.loaded += 1
            self._remember(key, entry)
            return entry, computed
        finally:
            held = self._running.get(key)
            if held is not None and held[0] == validator:
                del self._running[key]

    def _remember(self, key: Hashable, entry: CachedEntry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
