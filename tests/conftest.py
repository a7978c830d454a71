"""Shared pytest fixtures. Add your own below; keep each one small."""

from __future__ import annotations

import compileall
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from xdist.scheduler import LoadFileScheduling

from datasette_capsem.catalog import Catalog
from datasette_capsem.config import load_settings
from datasette_capsem.generate import GenerateOptions, generate_home
from datasette_capsem.index import IndexService
from datasette_capsem.state import get_state
from tests.browser import browser  # noqa: F401  (a session-wide headless Chromium)
from tests.helpers import ROOT, make_datasette

# Bytecode, compiled once. A machine that sets PYTHONDONTWRITEBYTECODE (this one does) makes
# every Python process compile the plugin's ~150 modules from source, ~0.3 s of CPU each, and
# the suite starts ~100 of them (servers, CLI runs, index workers) besides its two workers;
# pytest's workers would also rewrite every test module anew (~3 s each). The controller
# compiles the plugin into its `__pycache__` (gitignored; a changed file is compiled again on
# the next run, a stale file is never read: its source's size and mtime are checked), and
# pytest may keep its rewritten test modules there.
sys.dont_write_bytecode = False
if "PYTEST_XDIST_WORKER" not in os.environ:
    compileall.compile_dir(ROOT / "datasette_capsem", quiet=1)

# Test files in memory: the suite writes a few GB of homes, copies and caches, and on a disk
# each SQLite commit waits for its fsync (a generated home took 7-10 s there, 3 s in tmpfs) and
# the next run waits for pytest's removal of the old runs' files. With pyproject's
# `tmp_path_retention_policy = "failed"` a passing run leaves nothing behind. Used when
# /dev/shm has room for a run (a container's default 64 MB has not) and so has the memory
# (tmpfs pages are memory), and no root was chosen (PYTEST_DEBUG_TEMPROOT, --basetemp).
MEMORY_ROOT, MEMORY_ROOM = Path("/dev/shm"), 8 * 1024**3


def _memory_available() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


if "PYTEST_DEBUG_TEMPROOT" not in os.environ and os.access(MEMORY_ROOT, os.W_OK):
    free = os.statvfs(MEMORY_ROOT)
    if min(free.f_bavail * free.f_frsize, _memory_available()) >= MEMORY_ROOM:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(MEMORY_ROOT)


def pytest_configure(config: pytest.Config) -> None:
    # Tests send Ctrl-C (SIGINT) to the commands they start. A suite started in the background
    # by a shell without job control (`pytest ... &` in a script) inherits SIGINT ignored, and
    # so would every command it starts: Python then installs no KeyboardInterrupt handler and
    # the commands go on as if never interrupted. Restore the default a terminal gives.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers", "heavy: a test of tens of seconds; its module is scheduled first"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules holding a `heavy` test first, each module's tests kept together and in order:
    xdist hands out modules in this order (`pytest_xdist_make_scheduler`), so the longest
    start while the other worker has plenty left, instead of one of them running alone at the
    end of the suite."""
    for item in items:  # `-m "not browser"`, the fast inner loop, leaves out every page test
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    heavy = {item.module.__name__ for item in items if item.get_closest_marker("heavy")}
    items.sort(key=lambda item: item.module.__name__ not in heavy)  # stable: order kept


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`-n 2` hands out whole modules: a module's fixtures (its home copies, instances, built
    indexes) are then built once, on one worker, where splitting its tests between the workers
    built them on both. The modules go in collection order (those holding a `heavy` test first,
    see above), not xdist's by number of tests. An explicit `--dist` is obeyed."""
    if any(arg == "-d" or arg.startswith("--dist") for arg in config.invocation_params.args):
        return None
    config.option.loadscopereorder = False
    return LoadFileScheduling(config, log)


@pytest.fixture(scope="session")
def generated_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The default generated home, built once per test run: (path, manifest)."""
    path = tmp_path_factory.mktemp("capsem-home") / "home"
    manifest = generate_home(path, GenerateOptions())
    return path, manifest


@pytest.fixture(scope="session")
def clean_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A generated home without injected defects, hostile values or broken files (its counts
    are exact), built once per run: (path, manifest). Read only; copy it to write."""
    path = tmp_path_factory.mktemp("capsem-clean-home") / "home"
    return path, generate_home(path, GenerateOptions(defects=False, hostile=False, broken=False))


@pytest.fixture(scope="session")
def capsem_home(generated_home: tuple[Path, dict]) -> Path:
    """Path of the default generated Capsem home (read it, do not modify it)."""
    return generated_home[0]


@pytest.fixture(scope="session")
def manifest(generated_home: tuple[Path, dict]) -> dict:
    """manifest.json of ``capsem_home``: what was injected where."""
    return generated_home[1]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin cache shared by the read-only tests of ``capsem_home`` (derived files only)."""
    return tmp_path_factory.mktemp("capsem-cache")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def datasette(capsem_home: Path, cache_dir: Path):
    """One started Datasette over ``capsem_home`` with the default (masked) secret policy, for
    every module that only reads; a module needing other settings defines its own."""
    return await make_datasette(capsem_home, cache_dir)


@pytest.fixture(scope="session")
def operator_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin cache of ``operator_datasette`` (its own: what it derives is unmasked)."""
    return tmp_path_factory.mktemp("capsem-cache-operator")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def operator_datasette(capsem_home: Path, operator_cache_dir: Path):
    """One started Datasette over ``capsem_home`` for an operator: credentials shown and raw
    bodies downloadable (`view_secrets`). Read only, like ``datasette``."""
    return await make_datasette(capsem_home, operator_cache_dir, view_secrets=True)


@pytest.fixture(scope="module")
def built_cache(capsem_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plugin cache whose index another service built (as `datasette capsem index` leaves
    it), once per module: a module's instances read it as a restarted server would."""
    cache = tmp_path_factory.mktemp("built-cache")
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache)})
    IndexService(settings, Catalog(settings)).refresh()
    return cache


@pytest.fixture(scope="session")
def index_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin cache holding ``built_index`` (read it, never refresh it with other files)."""
    return tmp_path_factory.mktemp("capsem-cache-indexed")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def indexed_datasette(capsem_home: Path, index_cache_dir: Path):
    """One started Datasette over ``capsem_home`` whose cross-session index is built, once per
    run, for every test that only reads the index (a test changing a home builds its own)."""
    datasette = await make_datasette(capsem_home, index_cache_dir)
    get_state(datasette).index.refresh()
    return datasette


@pytest.fixture(scope="session")
def built_index(indexed_datasette):
    """The `IndexService` of ``indexed_datasette``: ``capsem_home``'s index, built once."""
    return get_state(indexed_datasette).index


@pytest.fixture
def private_home(capsem_home: Path, tmp_path: Path) -> Path:
    """A copy of ``capsem_home`` for one test that writes (a live session, a new or changed
    file): never write to a shared home. Symlinks are copied as links, as Capsem leaves them."""
    home = tmp_path / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    return home


@pytest.fixture(scope="session")
def homes_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small generated homes side by side, `alpha` and `beta` (a `homes_dir`): different
    seeds, so UUID ids differ while legacy name-keyed ids (`co-work-2`, …) collide. Read only."""
    root = tmp_path_factory.mktemp("capsem-homes") / "homes"
    for label, seed in (("alpha", 1), ("beta", 2)):
        generate_home(
            root / label, GenerateOptions(seed=seed, defects=False, hostile=False, broken=False)
        )
    return root
