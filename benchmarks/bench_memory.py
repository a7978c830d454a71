"""Issue 29: where a big home's memory goes, and what a server's start costs.

In one process over a home (default benchmarks/out/scale-100000, made by `scale_home.py`;
read-only), step by step: the catalog scan, the index's stored figures (when --cache holds
a built index), the whole session list (`SessionTable`), the per-snapshot lookup maps; RSS
after each step (MB, and what the step added), then tracemalloc's top allocation sites of
the same steps run again in a fresh process (tracemalloc doubles the heap and slows the
steps, so its run is apart from the RSS run). With --server: a real server
(`benchmarks/_server.py`) over the home, from spawn to the first `/` answered 200, beside
plain Datasette (`datasette serve` of one ledger, the plugin unregistered) to its first `/`,
and an interpreter that only imports Datasette, then the plugin: what the plugin adds.

With --rss: a real server over the home and cache (no background refresh), its RSS after the
first `/`, once the whole list is built, and after --visits session table pages; with
--refresh the server's default background refresh runs, as a real instance's, and its RSS
after the first refresh after the start is measured too (--timeline: RSS every 0.5 s).

Usage: python benchmarks/bench_memory.py [--home DIR] [--cache DIR] [--top 25]
       [--no-trace] [--server] [--starts 3] [--rss [--refresh] [--timeline]] [--visits 1000]
       [--no-steps]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import httpx
from common import HERE, OUT, free_port, rss_mb, wait_until_idle


def _rss() -> float:
    return rss_mb(os.getpid())


def steps(home: Path, cache: Path) -> tuple[list[tuple[str, float, float]], list]:
    """(step, RSS after it, seconds it took) for the in-process steps, and what they made."""
    # Imported here, not at the top: what the imports cost is the first step measured.
    from datasette_capsem.catalog import Catalog
    from datasette_capsem.config import load_settings
    from datasette_capsem.index.listing import SessionTable
    from datasette_capsem.index.service import IndexService
    from datasette_capsem.memory import limit_malloc_arenas, settle_heap, trim_malloc

    limit_malloc_arenas()
    found = [("imports", _rss(), 0.0)]
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache)})
    catalog = Catalog(settings)
    index = IndexService(settings, catalog)
    table = SessionTable(catalog.database_name)
    keep = []

    def step(name, work):
        started = time.perf_counter()
        keep.append(work())
        seconds = time.perf_counter() - started
        settle_heap()
        trim_malloc()
        found.append((name, _rss(), seconds))

    step("catalog scan", lambda: catalog.snapshot())
    snapshot = keep[-1]
    step("index snapshot", lambda: index.snapshot())
    step("whole list", lambda: table.rows(snapshot, keep[-1]))
    step("sort by cost", lambda: table.ordered(keep[-1], "cost", True))
    step("lookup maps", lambda: (snapshot.by_name, snapshot.id_keys, snapshot.match_keys()))
    sessions = snapshot.sessions
    print(
        f"{len(sessions):,} sessions, "
        f"{sum(1 for s in sessions.values() if s.ledger_path):,} with a ledger, "
        f"{len(keep[1].ledgers):,} ledgers indexed, {len(keep[1].checks):,} verdicts"
    )
    return found, keep


def traced(home: Path, cache: Path, top: int) -> None:
    tracemalloc.start(1)
    _found, _kept = steps(home, cache)
    gc.collect()
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    stats = snapshot.statistics("lineno")
    total = sum(stat.size for stat in stats)
    print(f"\ntracemalloc: {total / 2**20:.1f} MB live in {len(stats):,} sites; top {top}:")
    for stat in stats[:top]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        print(f"  {stat.size / 2**20:7.1f} MB {stat.count:>9,} blocks  {where}")


def _first_page(args: list[str], path: str = "/") -> float:
    """Seconds from spawning `_server.py args` until `path` answers 200."""
    port = free_port()
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(HERE / "_server.py"), "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            while True:
                try:
                    if client.get(path).status_code == 200:
                        return time.perf_counter() - began
                except httpx.HTTPError:
                    pass
                if process.poll() is not None:
                    raise RuntimeError(f"server {args} exited")
                time.sleep(0.02)
    finally:
        process.terminate()
        process.wait(timeout=10)


def _status_mb(pid: int) -> dict[str, float]:
    """RSS, its anonymous part (the heap: what the plugin holds) and the peak, in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def _index_state(client: httpx.Client) -> dict:
    return client.get("/-/capsem/index.json").json()


def server_rss(
    home: Path, cache: Path, visits: int, refresh: bool = False, timeline: bool = False
) -> dict[str, float]:
    """A real server's RSS (MB) after its first `/`, once the whole list is built and after
    `visits` session table pages. Without `refresh`: no background index refresh (the index
    as it is on disk). With it: the server's default background refresh runs (as a real
    instance's), and its RSS is measured after the first refresh after the start too (and
    the list built again after it), then after the visits; `timeline` prints RSS every
    half second meanwhile."""
    port = free_port()
    args = ["--home", str(home), "--cache", str(cache)]
    if not refresh:
        args += ["--index-refresh-seconds", "0"]
    process = subprocess.Popen(
        [sys.executable, str(HERE / "_server.py"), "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    found: dict[str, float] = {}
    began = time.perf_counter()
    samples: list[tuple[float, dict[str, float]]] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.5):
            with contextlib.suppress(OSError):
                samples.append((time.perf_counter() - began, _status_mb(process.pid)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    def note(name: str) -> None:
        found[name] = rss_mb(process.pid)
        if timeline:
            print(f"  {time.perf_counter() - began:7.1f} s  {name}: {_status_mb(process.pid)}")

    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
            while True:
                try:
                    if client.get("/").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.05)
            note("after the first /")
            while client.get("/-/capsem/sessions.json?_size=1").json().get("partial"):
                time.sleep(0.5)
            note("whole list built")
            if refresh:  # the first refresh after the start, and the list built after it
                while not _index_state(client).get("last_refresh_at"):
                    time.sleep(0.5)
                while _index_state(client).get("refreshing"):
                    time.sleep(0.5)
                # after the refresh: the list built again, the session dirs handed to the
                # notifier (a round of the background thread, then its pause)
                wait_until_idle(process.pid, seconds=120, window=3.0)
                while client.get("/-/capsem/sessions.json?_size=1").json().get("partial"):
                    time.sleep(0.5)
                note("after the first refresh")
            names = [p.name for p in (home / "run" / "sessions").iterdir()][:visits]
            for name in names:
                client.get(f"/{name}/model_calls.json?_size=5")
            if refresh:
                wait_until_idle(process.pid, seconds=120)
            note(f"after {len(names):,} visits")
            found["peak"] = _status_mb(process.pid)["VmHWM"]
    finally:
        sampling.set()
        sampler.join()
        process.terminate()
        process.wait(timeout=10)
    if timeline:
        for at, status in samples:
            print(f"  {at:7.1f} s  " + "  ".join(f"{k} {v:6.1f}" for k, v in status.items()))
    return found


def _import_seconds(statement: str) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True)
    return time.perf_counter() - began


def server_start(home: Path, cache: Path, starts: int) -> None:
    ledger = next(home.glob("run/sessions/*/session.db"))
    rows = {
        "python -c pass": lambda: _import_seconds("pass"),
        "import datasette.app": lambda: _import_seconds("import datasette.app"),
        "import datasette.app + the plugin": lambda: _import_seconds(
            "import datasette.app, datasette_capsem"
        ),
        "plain Datasette, one ledger: spawn to first /": lambda: _first_page(
            ["--plain", str(ledger)]
        ),
        "the plugin over the home: spawn to first /": lambda: _first_page(
            ["--home", str(home), "--cache", str(cache)]
        ),
    }
    print(f"\nstart, median of {starts} (s):")
    for name, run in rows.items():
        times = [run() for _ in range(starts)]
        print(
            f"  {statistics.median(times):6.2f}  {name}  ({', '.join(f'{t:.2f}' for t in times)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=OUT / "scale-100000")
    parser.add_argument("--cache", type=Path, help="a cache dir holding a built index")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-trace", action="store_true")
    parser.add_argument("--server", action="store_true")
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--rss", action="store_true", help="a real server's RSS (needs --cache)")
    parser.add_argument("--visits", type=int, default=1000)
    parser.add_argument(
        "--refresh",
        action="store_true",
        help="with --rss: the server's default background refresh runs (RSS after its first too)",
    )
    parser.add_argument("--timeline", action="store_true", help="with --rss: RSS every 0.5 s")
    parser.add_argument(
        "--no-steps", action="store_true", help="skip the in-process steps (and their trace)"
    )
    parser.add_argument("--trace-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    home = args.home.resolve()
    with tempfile.TemporaryDirectory() as empty:
        cache = (args.cache or Path(empty)).resolve()
        if args.trace_only:
            traced(home, cache, args.top)
            return
        if not args.no_steps:
            found, _kept = steps(home, cache)
            print(f"\n{'step':<16} {'RSS MB':>8} {'added':>8} {'seconds':>8}")
            last = found[0][1]
            for name, rss, seconds in found:
                print(f"{name:<16} {rss:8.1f} {rss - last:8.1f} {seconds:8.2f}")
                last = rss
            print(json.dumps({name: round(rss, 1) for name, rss, _ in found}))
            del _kept
        if not (args.no_trace or args.no_steps):
            command = [sys.executable, __file__, "--home", str(home), "--trace-only"]
            command += ["--top", str(args.top)] + (["--cache", str(cache)] if args.cache else [])
            subprocess.run(command, check=True)
        if args.server:
            server_start(home, cache, args.starts)
        if args.rss:
            which = "default background refresh" if args.refresh else "no background refresh"
            print(f"\nserver RSS (MB, {which}):")
            found = server_rss(home, cache, args.visits, args.refresh, args.timeline)
            for name, rss in found.items():
                print(f"  {rss:7.1f}  {name}")


if __name__ == "__main__":
    main()
