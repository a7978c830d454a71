"""Issue 29: does the cost stay flat as a home grows? 10,000 and 100,000 sessions in one run.

Homes come from `scale_home.py` (copies of generated ledgers under new ids, 30 % with a
ledger, the rest vacuumed main.db rows over 300 days; cached in benchmarks/out/). For each
size, in this order:

1. a server over the home with an EMPTY cache: start to the first `/` answered (the index
   not built: the page must not wait for it), RSS then; up to --build-up-to sessions, then
   until the background build is done (the first index build), RSS then;
2. the sqlite3 CLI reading the rows that build read (one `.open` per ledger and the
   statements the build sent, captured once per home with SQLite's trace callback and kept
   in benchmarks/out/);
3. the server restarted over the built cache: start to the first `/`, that first `/` alone
   and what it listed, RSS after start, the time until the list answers whole; then side by side with plain `datasette serve` of one ledger (requests
   alternate, medians): `/`, the list's JSON, an id search (an event id found in one
   session), findings, resolve (an id prefix), a session overview (first visit); then 1,000
   visits of session table pages and RSS after them.

Usage: python benchmarks/bench_scale.py [--sizes 10000,100000] [--requests 15] [--no-cli]
       [--keep-cache] [--build-up-to N] [--homes DIR]
A first build of 100,000 sessions (30,000 ledgers) takes most of an hour on a loaded 2-core
machine: `--keep-cache --build-up-to 10000` measures it at 10,000 only and reuses the index
kept in benchmarks/out/cache-scale-100000 (`datasette capsem index --home
benchmarks/out/scale-100000 --cache-dir benchmarks/out/cache-scale-100000` makes it).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from bench_build import captured
from bench_check import cli_run, load, sqlite3_cli
from common import (
    HERE,
    OUT,
    cpu_between,
    free_port,
    print_table,
    request_cpu_seconds,
    rss_mb,
    wait_for_index,
    wait_until_idle,
)
from scale_home import probe_event_ids, probe_sessions, scale_home

VISITS = 1000


@contextlib.contextmanager
def started(*args: str, first: str = "/", deadline: float = 900):
    """A server process; yields (client, pid, seconds from spawn until `first` answered 200,
    seconds that one first request took)."""
    port = free_port()
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(HERE / "_server.py"), "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=deadline)
    try:
        while True:
            try:
                client.get("/-/versions.json", timeout=2)
                break
            except httpx.HTTPError:
                pass
            if time.perf_counter() - began > deadline or process.poll() is not None:
                raise RuntimeError(f"server {args} did not start")
            time.sleep(0.02)
        request = time.perf_counter()
        response = client.get(first)
        if response.status_code != 200:
            raise RuntimeError(f"{first}: {response.status_code} {response.text[:300]}")
        done = time.perf_counter()
        yield client, process.pid, done - began, done - request
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=30)


def until_whole_list(client: httpx.Client, seconds: float = 1800) -> float:
    """Seconds until the list answers whole (not a provisional or older list)."""
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        if client.get("/-/capsem/sessions.json?_size=1").json().get("partial") is None:
            break
        time.sleep(0.25)
    return time.perf_counter() - began


def timed(client: httpx.Client, url: str) -> float:
    began = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - began) * 1000
    if response.status_code >= 400:
        raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
    return elapsed


def side_by_side(
    ours: httpx.Client, plain: httpx.Client, urls: list[str], plain_url: str, pids: tuple[int, int]
) -> tuple[float, float, float, float]:
    """Medians of ours and plain's wall ms (requests alternate), then each server's CPU ms a
    request over the run: the wall time of a loaded 2-core machine swings between runs, a
    server's CPU much less. Only the threads that serve requests are counted (the event loop,
    Datasette's SQL threads, the executors'; /proc's 10 ms ticks per thread): the plugin's
    background threads (the index refresh, the list build, the catalog scan; `capsem-*`) are
    not, nor the refresh's worker processes: at 100,000 sessions the first background
    refresh after the start still runs during the first pages."""
    mine, theirs = [], []
    cpu_before = [request_cpu_seconds(pid) for pid in pids]
    for url in urls:
        mine.append(timed(ours, url))
        theirs.append(timed(plain, plain_url))
    cpu = [
        cpu_between(before, request_cpu_seconds(pid)) * 1000 / len(urls)
        for pid, before in zip(pids, cpu_before, strict=True)
    ]
    return statistics.median(mine), statistics.median(theirs), cpu[0], cpu[1]


def cli_script_of(home: Path) -> tuple[str, int]:
    """The sqlite3 shell script reading what a full build reads (quick check included),
    captured once per home path and plugin source (`bench_build.captured`): a script kept
    under the home's name alone named the ledgers of another checkout, and would replay
    another build's statements once the build changed."""
    return captured(home)


def one_size(
    sessions: int,
    requests: int,
    with_cli: bool,
    keep_cache: bool,
    build_up_to: int,
    homes: Path | None = None,
) -> dict:
    home = scale_home(sessions) if homes is None else homes / f"scale-{sessions}"
    if not (home / "scale.json").exists():
        raise SystemExit(f"{home} is not a scale_home.py home (no scale.json)")
    cache = OUT / f"cache-scale-{sessions}"
    figures: dict = {"sessions": sessions}
    build = sessions <= build_up_to and not (keep_cache and cache.exists())
    # 1. no index yet: a server over an empty cache
    cold = OUT / f"cache-scale-{sessions}-cold"
    shutil.rmtree(cold, ignore_errors=True)
    with started("--home", str(home), "--cache", str(cold)) as (client, pid, start, first):
        figures["start_cold"], figures["first_cold"] = start, first
        figures["rss_cold"] = rss_mb(pid)
        if build:
            figures["build"] = start + wait_for_index(client, seconds=7200)
            figures["rss_build"] = rss_mb(pid)
            wait_until_idle(pid, seconds=120)
            figures["rss_build_idle"] = rss_mb(pid)
    if build:
        shutil.rmtree(cache, ignore_errors=True)
        cold.rename(cache)
    else:
        shutil.rmtree(cold, ignore_errors=True)
    # 2. the sqlite3 CLI on the same reads
    if with_cli and "build" in figures:
        script, count = cli_script_of(home)
        figures["cli"] = cli_run(sqlite3_cli(), [":memory:"], script)
        figures["cli_statements"] = count
    # 3. restart over the built index
    ids = probe_event_ids(home, requests)
    probes = probe_sessions(home)
    plain_ledger = home / "run" / "sessions" / probes[-1] / "session.db"
    with (
        started("--home", str(home), "--cache", str(cache)) as (client, pid, start, first),
        started("--plain", str(plain_ledger), first="/session/model_calls") as (
            plain,
            plain_pid,
            plain_start,
            _f,
        ),
    ):
        figures["start_plain"] = plain_start
        figures["start_warm"], figures["first_warm"] = start, first
        figures["rss_start"] = rss_mb(pid)
        figures["first_partial"] = (
            client.get("/-/capsem/sessions.json?_size=1").json().get("partial")
        )
        figures["list_complete"] = start + until_whole_list(client)
        figures["rss_list"] = rss_mb(pid)
        wait_until_idle(pid, seconds=120)
        plain_url = "/session/model_calls"
        timed(plain, plain_url)
        pages = {
            "/": ["/"] * requests,
            "list JSON (50 rows)": ["/-/capsem/sessions.json?_size=50&all=1"] * requests,
            "list page, sorted by cost": ["/-/capsem?_sort_desc=cost&all=1"] * requests,
            "id search (event id)": [f"/-/capsem/search?q={e}" for _, e in ids[:requests]],
            "findings": ["/-/capsem/findings"] * requests,
            "resolve (id prefix)": [
                f"/-/capsem/resolve.json?name={s[:12]}" for s in probes[:requests]
            ],
            "session overview (first visit)": [
                f"/-/capsem/sessions/{s}" for s in probes[:requests]
            ],
        }
        figures["pages"] = {
            name: side_by_side(client, plain, urls, plain_url, (pid, plain_pid))
            for name, urls in pages.items()
        }
        with_ledgers = [p.name for p in (home / "run" / "sessions").iterdir()][: VISITS + 1]
        for name in with_ledgers[:VISITS]:
            client.get(f"/{name}/model_calls.json?_size=5")
        figures["rss_visits"] = rss_mb(pid)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--no-cli", action="store_true", help="skip the sqlite3 CLI comparison")
    parser.add_argument(
        "--keep-cache",
        action="store_true",
        help="reuse each size's built index (benchmarks/out/cache-scale-N) if there is one: "
        "no first build and no CLI comparison",
    )
    parser.add_argument(
        "--build-up-to",
        type=int,
        default=100_000,
        help="wait for the first build (and compare it with the CLI) only up to this size; "
        "above it the start without an index is measured and the server stopped",
    )
    parser.add_argument(
        "--homes",
        type=Path,
        help="read the homes scale-N from this directory (another checkout's "
        "benchmarks/out: its homes are only read, never made or written) instead of "
        "making them in benchmarks/out; the caches stay in benchmarks/out, and a kept "
        "cache must have been built over the same home path",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = [
        one_size(n, args.requests, not args.no_cli, args.keep_cache, args.build_up_to, args.homes)
        for n in sizes
    ]
    header = ["what"] + [f"{r['sessions']:,} sessions" for r in results]
    if len(results) > 1:
        header.append(f"{results[-1]['sessions']:,} / {results[0]['sessions']:,}")

    def get(r, key, spec):
        return format(r[key], spec) if key in r else "-"

    def row(label, values, unit=""):
        cells = [label] + [f"{v}{unit}" for v in values]
        if len(results) > 1:
            try:
                cells.append(f"{float(values[-1]) / float(values[0]):.2f}x")
            except (ValueError, ZeroDivisionError):
                cells.append("")
        return cells

    table = [
        row("start to first `/`, no index yet (s)", [get(r, "start_cold", ".2f") for r in results]),
        row("  that first `/` alone (s)", [get(r, "first_cold", ".2f") for r in results]),
        row("RSS right after that (MB)", [get(r, "rss_cold", ".0f") for r in results]),
        row(
            "plain `datasette serve` of one ledger: start to its table page (s)",
            [f"{r['start_plain']:.2f}" for r in results],
        ),
        row("start to first `/`, index built (s)", [f"{r['start_warm']:.2f}" for r in results]),
        row("  that first `/` alone (s)", [f"{r['first_warm']:.2f}" for r in results]),
        row(
            "  what it listed",
            [
                "whole list"
                if not r["first_partial"]
                else f"newest {r['first_partial']['shown']} (list being prepared)"
                if r["first_partial"]["shown"]
                else "the previous list (being updated)"
                for r in results
            ],
        ),
        row("start to the whole list answered (s)", [f"{r['list_complete']:.1f}" for r in results]),
        row("first index build in the server (s)", [get(r, "build", ".1f") for r in results]),
    ]
    if all("cli" in r for r in results):
        table.append(
            row(
                "sqlite3 CLI reading the same rows (s)",
                [f"{r['cli']:.1f} ({r['cli_statements']:,} statements)" for r in results],
            )
        )
        table.append(row("  build / CLI", [f"{r['build'] / r['cli']:.2f}" for r in results], "x"))
    for name in results[0]["pages"]:
        table.append(
            row(
                f"{name}: capsem / plain table page ms",
                [
                    f"{r['pages'][name][0]:.1f} / {r['pages'][name][1]:.1f} = "
                    f"{r['pages'][name][0] / r['pages'][name][1]:.2f}x"
                    for r in results
                ],
            )
        )
        if len(results) > 1:
            table[-1][-1] = f"{results[-1]['pages'][name][0] / results[0]['pages'][name][0]:.2f}x"
        table.append(
            row(
                "  server CPU a request: capsem / plain ms",
                [
                    f"{r['pages'][name][2]:.1f} / {r['pages'][name][3]:.1f} = "
                    f"{r['pages'][name][2] / max(r['pages'][name][3], 0.01):.2f}x"
                    for r in results
                ],
            )
        )
        if len(results) > 1:
            first, last = results[0]["pages"][name][2], results[-1]["pages"][name][2]
            table[-1][-1] = f"{last / max(first, 0.01):.2f}x"
    table += [
        row("RSS after the first build (MB)", [get(r, "rss_build", ".0f") for r in results]),
        row("  ... once idle (MB)", [get(r, "rss_build_idle", ".0f") for r in results]),
        row("RSS after restart and first `/` (MB)", [f"{r['rss_start']:.0f}" for r in results]),
        row("RSS once the whole list is built (MB)", [f"{r['rss_list']:.0f}" for r in results]),
        row(f"RSS after {VISITS:,} visits (MB)", [f"{r['rss_visits']:.0f}" for r in results]),
    ]
    print_table(
        f"Issue 29: flat cost as the home grows (load {load()}, "
        f"{args.requests} requests per page, medians)",
        header,
        table,
    )


if __name__ == "__main__":
    main()
