"""A versioned store of computed values on disk: one compressed JSON file per (file, profile),
valid while the value's validator and its producer's version are unchanged.

The rule book's reports (`checks/cache.py`) and the trace page's answers
(`views/trace_cache.py`) are kept here, in the plugin's cache dir (never in a Capsem home):
a restarted server, a second server over the same cache, and the index refresh share them.
A value is keyed by the resolved path of the file it was computed from (hashed into the
file name) and a profile, and holds while its validator is unchanged: the file's and its
-wal's size and mtime, liveness, and whatever else its producer puts in the validator.
Values of live sessions are never stored (`store_key`). Files are written 0600 under a 0700
directory, to a temporary file moved into place, so readers see a whole old or new file.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
import zlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

STORE_FORMAT = 1  # bump when the file layout or a codec changes
# zlib's fastest level: a quick report compresses to 6.8 instead of 5.8 KB, in a third of
# the time (the index build stores 10,000 of them). Any level reads back the same way.
STORE_ZLIB_LEVEL = 1
HEADER_MAX_BYTES = 65536
TEMPORARY_MAX_AGE_SECONDS = 3600.0  # a temporary file this old was left by a killed writer
PRUNE_INTERVAL_SECONDS = 3600.0  # how often a server prunes the store (after its first save)


@dataclass
class CachedEntry:
    validator: Hashable
    computed_at: float  # epoch seconds when the run started: the state it describes
    report: Any  # a report dict, or the rule book's RowVerdicts
    # A report of a stopped session holds while its validator does; a live one ages out.
    timeless: bool = False


@dataclass(frozen=True)
class Codec:
    """How a cached value becomes JSON and back."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


def _json_object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError("a stored value is not an object")
    return data


JSON_OBJECT = Codec(encode=lambda value: value, decode=_json_object)


@dataclass(frozen=True)
class StoreKey:
    """Where one report of one ledger file is stored: the file (resolved) and the profile."""

    ledger: str
    profile: str
    codec: Codec = JSON_OBJECT

    @property
    def filename(self) -> str:
        # A digest, never the path itself: nothing from a URL or a file name reaches the path.
        name = f"{self.ledger}\0{self.profile}".encode("utf-8", "surrogatepass")
        return hashlib.blake2b(name, digest_size=20).hexdigest() + ".json.z"


def store_key(
    session: Any, path: Path | str | None, profile: str, codec: Codec = JSON_OBJECT
) -> StoreKey | None:
    """The store's key of a session's report, or None when it is not stored: no ledger, or a
    live one (its report may depend on the clock)."""
    if path is None or session.live:
        return None
    try:
        resolved = str(Path(path).resolve())
    except (OSError, RuntimeError):
        return None
    return StoreKey(resolved, profile, codec)


def _digest(validator: Hashable, version: str) -> str:
    text = repr((STORE_FORMAT, version, validator)).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=20).hexdigest()


class VersionedStore:
    """Reports on disk, one compressed JSON file per (ledger file, profile), in the plugin's
    cache dir. Written to a temporary file and moved into place with `os.replace`, so readers
    (other threads, other server processes) see a whole old file or a whole new one; the last
    writer wins. An unreadable, corrupt or stale file is a miss, overwritten by the next run.
    Errors never reach a page: the store then simply does not help."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.saved = 0  # reports written
        self.loaded = 0  # reports read back and still valid
        self._pruned_at: float | None = None  # time.monotonic() of the last prune

    @classmethod
    def in_cache(cls, cache_dir: Path, directory: str) -> VersionedStore:
        return cls(Path(cache_dir) / directory)

    def prune_now_and_then(self) -> None:
        """Prune in the background (the running event loop's executor) after the first save,
        then hourly at most."""
        now = time.monotonic()
        if self._pruned_at is None or now - self._pruned_at > PRUNE_INTERVAL_SECONDS:
            self._pruned_at = now
            asyncio.get_running_loop().run_in_executor(None, self.prune)

    def path_of(self, key: StoreKey) -> Path:
        return self.directory / key.filename

    def load(
        self, key: StoreKey, validator: Hashable, version: str, part: str | None = None
    ) -> CachedEntry | None:
        """The stored report for `key` if it was computed at `validator` by this rule book;
        with `part`, if that part of it was (`save`'s `parts`), whatever the whole was."""
        try:
            head, _, body = self.path_of(key).read_bytes().partition(b"\n")
            header = json.loads(head)
            held = header.get("validator") if part is None else header.get("parts", {}).get(part)
            if (
                header.get("format") != STORE_FORMAT
                or header.get("ledger") != key.ledger
                or header.get("profile") != key.profile
                or held != _digest(validator, version)
            ):
                return None
            report = key.codec.decode(json.loads(zlib.decompress(body)))
            entry = CachedEntry(validator, float(header["computed_at"]), report, timeless=True)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError, zlib.error):
            log.info("ignoring an unreadable stored report %s", self.path_of(key).name)
            return None
        self.loaded += 1
        return entry

    def save(
        self,
        key: StoreKey,
        entry: CachedEntry,
        version: str,
        parts: dict[str, Hashable] | None = None,
        encoded: str | None = None,
    ) -> bool:
        """Write `entry` for `key` atomically; False when it cannot be (and nothing changed).
        The file is a one-line JSON header (what it is of, for `load` and `prune`), then the
        report as zlib-compressed JSON. `parts`: validators of parts of the report a reader
        may take alone (`load(part=...)`), e.g. the findings that depend on the file only.
        `encoded`: the report's JSON text when the caller made it (the very text
        `json.dumps(codec.encode(report), separators=(",", ":"))` gives; `entry.report` is
        then not read)."""
        header = {
            "format": STORE_FORMAT,
            "ledger": key.ledger,
            "profile": key.profile,
            "validator": _digest(entry.validator, version),
            "computed_at": entry.computed_at,
        }
        if parts:
            header["parts"] = {name: _digest(held, version) for name, held in parts.items()}
        try:
            report = encoded
            if report is None:
                report = json.dumps(key.codec.encode(entry.report), separators=(",", ":"))
            data = (
                json.dumps(header).encode()
                + b"\n"
                + zlib.compress(report.encode(), STORE_ZLIB_LEVEL)
            )
        except (TypeError, ValueError) as error:  # e.g. a BLOB row id: not JSON, not stored
            log.info("report of %s not stored: %s", key.ledger, error)
            return False
        try:
            self._write(self.path_of(key), data)
        except OSError as error:
            log.warning("could not store a report in %s: %s", self.directory, error)
            return False
        self.saved += 1
        return True

    def prune(self) -> int:
        """Remove the reports of ledger files that no longer exist (Capsem deletes a stopped
        ephemeral session's directory), unreadable files, and temporary files a killed writer
        left; returns how many files went. Reads each file's header line only."""
        removed = 0
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return 0
        for entry in entries:
            if self._stale(entry):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed += 1
        return removed

    @staticmethod
    def _stale(entry: os.DirEntry) -> bool:
        try:
            if entry.name.startswith(".tmp-"):
                return time.time() - entry.stat().st_mtime > TEMPORARY_MAX_AGE_SECONDS
            if not entry.name.endswith(".json.z"):
                return False
            with open(entry.path, "rb") as stream:
                header = json.loads(stream.readline(HEADER_MAX_BYTES))
            return not os.path.exists(header["ledger"])
        except FileNotFoundError:
            return False  # another process pruned it first
        except (OSError, ValueError, TypeError, KeyError):
            return True

    def _write(self, path: Path, data: bytes) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")  # 0600
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
