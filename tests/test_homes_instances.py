"""Two instances side by side behind a load balancer: two real server processes, each with its
own cache dir, over one set of read-only homes, asked the same pages at once."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.helpers import snapshot_tree
from tests.test_serve_cli import run_cli, wait_for

ROOT = Path(__file__).resolve().parent.parent  # the plugin of this checkout, in the servers
PAGES = (
    "/-/capsem/sessions/co-work-2.json",  # the chooser (300)
    "/-/capsem/resolve.json?name=co-work-2",
    "/-/capsem/sessions/beta--co-work-2.json",
    "/alpha--main/sessions.json?_shape=array&_size=max",
    "/beta--main/sessions.json?_shape=array&_size=max",
    "/-/capsem/sessions.json?_size=max&all=1&home=beta",
    "/-/capsem/sessions.json?_size=max&all=1",
    "/-/capsem/charts/sessions.json",
    "/-/capsem/search.json?q=error",
)
# What varies between two correct answers: when each instance refreshed or checked.
MOMENTS = {"index", "age_seconds", "checked_at", "check_ms", "integrity", "took_ms", "elapsed"}


def stable(value):
    """An answer without the moments each instance measured for itself."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in MOMENTS}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def indexed(base: str, process) -> None:
    """Wait until the instance's background index holds every ledger (bounds a hang only)."""
    deadline = time.time() + 300
    # One client for every read: a client per read (its TLS context) cost ~40 ms of CPU.
    with httpx.Client(base_url=base, timeout=30) as client:
        while time.time() < deadline:
            if process.poll() is not None:
                raise AssertionError(process.stderr.read())
            state = client.get("/-/capsem/index.json").json()
            if state["ready"] and not state["refreshing"] and state["sessions_checked"]:
                return
            time.sleep(0.1)  # a read of index.json costs little; 0.5 s waited ~0.25 s each
    raise AssertionError(f"{base}: the index never finished")


def answer(client: httpx.Client, base: str, path: str) -> tuple[int, object]:
    response = client.get(base + path, timeout=60)
    return response.status_code, stable(response.json())


def test_two_instances_over_the_same_homes_agree_and_write_nothing(homes_dir, tmp_path):
    before = snapshot_tree(homes_dir)
    servers = []
    for name in ("one", "two"):
        env = dict(
            os.environ,
            DATASETTE_CAPSEM_CACHE=str(tmp_path / name / "cache"),
            HOME=str(tmp_path / name / "user"),
            PYTHONPATH=str(ROOT),
        )
        env.pop("CAPSEM_HOME", None)
        servers.append(run_cli(["serve", "--homes-dir", str(homes_dir)], env))
    try:
        for process, base in servers:
            assert wait_for(base + "/", process).status_code == 200
        for process, base in servers:
            indexed(base, process)
        jobs = [(base, path) for path in PAGES for _round in range(3) for _p, base in servers]
        with ThreadPoolExecutor(max_workers=8) as pool, httpx.Client() as client:
            answers = list(pool.map(lambda job: (job, answer(client, *job)), jobs))
    finally:
        for process, _base in servers:
            process.terminate()
            process.wait(timeout=30)
    by_path: dict[str, set] = {}
    for (_base, path), (status, body) in answers:
        assert status in (200, 300), (path, status)
        by_path.setdefault(path, set()).add(repr((status, body)))
    assert {path: len(seen) for path, seen in by_path.items()} == dict.fromkeys(PAGES, 1)
    after = snapshot_tree(homes_dir)
    assert set(after) == set(before), "a file was created or removed in a home"
    # SQLite's reader bookkeeping in a live ledger's existing -shm is the one write a correct
    # read of a WAL file needs (spec §4.7); database and -wal bytes never change.
    assert [
        name for name in before if before[name] != after[name] and not name.endswith("-shm")
    ] == []
    for name in ("one", "two"):
        assert list((tmp_path / name / "cache").rglob("index.db"))  # each kept its own cache
