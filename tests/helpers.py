"""Building blocks for tests: a started Datasette over a Capsem home, and file snapshots."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datasette.app import Datasette

PLUGIN = "datasette-capsem"


async def make_datasette(
    home: Path,
    cache_dir: Path,
    *,
    metadata: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    **plugin_config,
) -> Datasette:
    """A Datasette serving `home` with the plugin, started, its cache kept in `cache_dir`."""
    metadata = dict(metadata or {})
    plugins = dict(metadata.get("plugins") or {})
    plugins[PLUGIN] = {
        "capsem_home": str(home),
        "cache_dir": str(cache_dir),
        # No background index thread unless a test asks for one: tests refresh it explicitly,
        # and a thread per instance re-reading every ledger is most of a suite's CPU.
        "index_refresh_seconds": 0,
        **plugins.get(PLUGIN, {}),
        **plugin_config,
    }
    metadata["plugins"] = plugins
    # `config` (datasette.yaml) is Datasette 1.0's; 0.65 has no such argument.
    extra = {"config": config} if config is not None else {}
    datasette = Datasette(metadata=metadata, settings=settings or {}, **extra)
    await datasette.invoke_startup()
    return datasette


ROOT = Path(__file__).resolve().parent.parent
# Where commands and settings are documented: the README, docs/ and benchmarks/README.md.
DOCUMENTS = (
    "README.md",
    "docs/cli.md",
    "docs/pages.md",
    "docs/operating.md",
    "docs/architecture.md",
    "docs/extending.md",
    "docs/capsem-format.md",
    "benchmarks/README.md",
)


def documentation() -> str:
    """Every document's text, one after the other (each command runs in a test as written)."""
    return "\n\n".join((ROOT / name).read_text("utf-8") for name in DOCUMENTS)


def doc_section(heading: str) -> str:
    """The text under a `## heading` (or `### heading`) of any document, up to the next one."""
    text = documentation()
    for marker in (f"\n## {heading}\n", f"\n### {heading}\n"):
        if marker in text:
            return text.split(marker, 1)[1].split("\n## ", 1)[0]
    raise AssertionError(f"no section {heading!r} in {', '.join(DOCUMENTS)}")


def sessions_in(
    manifest: dict,
    *,
    has: tuple = (),
    lacks: tuple = (),
    where: Callable[[dict], Any] | None = None,
    **equal,
) -> list[dict]:
    """The manifest's sessions whose fields equal `equal`, with every field of `has` set (truthy),
    none of `lacks`, and for which `where(session)` is true (a condition the keywords cannot
    say: `in`, `!=`, a function of the session): how a test picks the generated sessions it
    needs."""
    return [
        s
        for s in manifest["sessions"]
        if all(s.get(key) == value for key, value in equal.items())
        and all(s.get(key) for key in has)
        and not any(s.get(key) for key in lacks)
        and (where is None or where(s))
    ]


def session_in(
    manifest: dict,
    *,
    has: tuple = (),
    lacks: tuple = (),
    where: Callable[[dict], Any] | None = None,
    **equal,
) -> dict:
    """The first of `sessions_in`; a test whose generated home lacks it fails saying which."""
    found = sessions_in(manifest, has=has, lacks=lacks, where=where, **equal)
    condition = f"{equal}, has {has}, lacks {lacks}" + (
        " and the `where` condition" if where else ""
    )
    assert found, f"no session of the manifest with {condition}"
    return found[0]


def snapshot_tree(root: Path) -> dict[str, tuple[str, int]]:
    """sha256 and mtime of every file below `root`, to prove nothing was written."""
    result = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for filename in filenames:
            path = Path(dirpath, filename)
            try:
                data = path.read_bytes()
            except PermissionError:
                data = b"<unreadable>"
            result[str(path.relative_to(root))] = (
                hashlib.sha256(data).hexdigest(),
                path.stat().st_mtime_ns,
            )
    return result


def actor_cookies(datasette: Datasette, actor_id: str) -> dict[str, str]:
    """Cookies that make `datasette.client` requests come from actor `actor_id` (0.65 API)."""
    return {"ds_actor": datasette.sign({"a": {"id": actor_id}}, "actor")}


async def make_labelled_datasette(cache_dir: Path, **plugin_config) -> Datasette:
    """A started Datasette over labelled homes (`homes` and/or `homes_dir` in `plugin_config`)."""
    config = {"cache_dir": str(cache_dir), "index_refresh_seconds": 0, **plugin_config}
    datasette = Datasette(metadata={"plugins": {PLUGIN: config}}, settings={})
    await datasette.invoke_startup()
    return datasette


HANG = 120  # seconds: only bounds a hang, never a figure


async def until(check: Callable[[], Any], what: str) -> Any:
    """`await check()` again every 50 ms until it is truthy (a hang fails after HANG seconds)."""
    started = time.monotonic()
    while not (found := await check()):
        assert time.monotonic() - started < HANG, f"never: {what}"
        await asyncio.sleep(0.05)
    return found
