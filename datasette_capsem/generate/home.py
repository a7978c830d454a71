"""generate_home: plan a home, write its ledgers (in parallel when there are many), then
main.db, the registry and manifest.json."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datasette_capsem.generate.maindb import write_main_db
from datasette_capsem.generate.manifest import build_manifest, write_manifest
from datasette_capsem.generate.options import GenerateOptions
from datasette_capsem.generate.plan import SessionSpec, make_plan
from datasette_capsem.generate.registry import REGISTRY, write_registry
from datasette_capsem.generate.sessions import SessionResult, write_session

Progress = Callable[[int, int], None]
DEFAULT_OPTIONS = GenerateOptions()
PARALLEL_THRESHOLD = 200  # below this, process start-up costs more than it saves
OWNED = ("sessions", "run", "manifest.json")


class GenerateError(Exception):
    """The target cannot receive a home; nothing was written."""


def is_capsem_home(path: Path) -> bool:
    return (path / "sessions" / "main.db").exists() or (path / "run").exists()


def check_target(path: Path, force: bool) -> None:
    """Refuse a target that is a file, unwritable, or (without force) already a Capsem home."""
    if path.exists() and not path.is_dir():
        raise GenerateError(f"{path} exists and is not a directory")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise GenerateError(f"{probe} is not a directory")
    if not _writable(probe):
        raise GenerateError(f"{probe} is not writable")
    if is_capsem_home(path) and not force:
        raise GenerateError(f"{path} is already a Capsem home; use --force to overwrite it")


def _writable(directory: Path) -> bool:
    """Really try (access() says yes to root even where writes fail, e.g. /proc)."""
    try:
        handle, name = tempfile.mkstemp(prefix=".capsem-probe-", dir=directory)
    except OSError:
        return False
    os.close(handle)
    os.unlink(name)
    return True


def clear_home(path: Path) -> None:
    """Remove what a previous generation wrote (only the generator's own top-level entries)."""
    for name in OWNED:
        target = path / name
        if target.is_dir():
            for sub in target.rglob("*"):
                if sub.is_file():
                    sub.chmod(0o600)
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()


def _write(args: tuple[Path, SessionSpec, GenerateOptions]) -> SessionResult:
    return write_session(*args)


def write_sessions(
    home: Path,
    specs: list[SessionSpec],
    options: GenerateOptions,
    progress: Progress | None,
    total: int,
) -> dict[str, SessionResult]:
    """Write every ledger file; results keyed by session id."""
    todo = [s for s in specs if s.ledger and not s.alias_of]
    jobs = [(home, s, options) for s in todo]
    workers = options.workers or (os.cpu_count() or 1)
    results: dict[str, SessionResult] = {}
    if len(jobs) >= PARALLEL_THRESHOLD and workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            for done, result in enumerate(pool.imap(_write, jobs, chunksize=8), start=1):
                results[result.id] = result
                if progress:
                    progress(done, total)
    else:
        for done, job in enumerate(jobs, start=1):
            result = _write(job)
            results[result.id] = result
            if progress:
                progress(done, total)
    return results


def date_unrecorded_dirs(home: Path, specs: list[SessionSpec]) -> None:
    """A session with no main.db row is dated by its dir's mtime (as Capsem's own listing
    would): set it to the session's planned start, else every such session (the broken files,
    a 1.1 VM) would be the newest of the home, stamped with the time it was generated."""
    for spec in specs:
        if spec.ledger and spec.status is None:
            directory = (home / spec.ledger).parent
            if directory.is_dir():
                when = spec.start.timestamp()
                os.utime(directory, (when, when))


def generate_home(
    path: Path, options: GenerateOptions = DEFAULT_OPTIONS, progress: Progress | None = None
) -> dict[str, Any]:
    """Write a complete Capsem home into ``path`` and return its manifest (also written to
    ``path``/manifest.json). Raises GenerateError or ValueError before writing anything."""
    options.validate()
    path = Path(path)
    check_target(path, options.force)
    if options.force:
        clear_home(path)
    path.mkdir(parents=True, exist_ok=True)
    specs = make_plan(options)
    total = sum(1 for s in specs if s.ledger and not s.alias_of) + 2
    results = write_sessions(path, specs, options, progress, total)
    date_unrecorded_dirs(path, specs)
    main_defects, main_hostile = write_main_db(path, specs, results, options)
    registry_hostile = write_registry(
        path, specs, options.seed, hostile=options.hostile, broken=options.broken_registry
    )
    broken = (
        [{"kind": "registry_invalid", "path": REGISTRY, "session": None}]
        if options.broken_registry
        else []
    )
    if progress:
        progress(total - 1, total)
    manifest = build_manifest(
        options.seed, specs, results, main_defects, main_hostile + registry_hostile, broken, 7
    )
    write_manifest(path, manifest)
    if progress:
        progress(total, total)
    return manifest
