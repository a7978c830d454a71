"""The session list and the cross-session index over 10,000 sessions.

Measures, on a generated home (reused from benchmarks/out/):
- full index build from an empty cache, a refresh with nothing changed, and the refresh after
  one ledger changed (target < 1 s; the ledger's bytes are restored afterwards);
- median latency of the list page and its JSON for each filter (target < 100 ms), through
  Datasette's in-process ASGI client, after one warm-up request per URL;
- the one-off cost of rebuilding the in-memory list after the index or catalog changed;
- with --build-vs-cli N: the full index build (`datasette capsem index`, a subprocess, from an
  empty cache) side by side with the sqlite3 command line reading the same rows: one shell
  `.open`-ing each ledger the build opened (the same URI) and running every statement the
  build sent to it (extraction, search text, the quick check profile; captured once with
  SQLite's trace callback, bound values expanded). The build also masks and writes what it
  read into index.db and stores each quick report; the shell only reads. Runs alternate
  build / shell, N of each; the ratio is of medians, the same-run ratios are printed too.

Usage: python benchmarks/bench_sessions.py [--sessions 10000] [--repeat 15]
       python benchmarks/bench_sessions.py --build-vs-cli 3 [--skip-list]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_check import children_cpu, cli_run, cli_script, load, ratio_row, sqlite3_cli
from common import generated_home, manifest, print_table
from datasette.app import Datasette

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog
from datasette_capsem.config import load_settings
from datasette_capsem.index import IndexService, parallel
from datasette_capsem.state import get_state

FILTERS = [
    "",
    "all=1",
    "with_db=1",
    "with_model=1&with_tools=1",
    "with_net=1&min_cost=0.05",
    "status=running",
    "kind=persistent&all=1",
    "since=2026-07-01&until=2026-08-31",
    "q=co-work",
    "_sort=cost",
    "_sort_desc=tokens&with_db=1",
    "_sort=name&_next=5000",
    "has_errors=1",
    "has_warnings=1&all=1",
    "has_finding=orphan_tool_response",
    "_sort_desc=verdict",
]
TARGET_MS = 100


def index_figures(home: Path, cache: Path) -> tuple[IndexService, list[list]]:
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache)})
    service = IndexService(settings, Catalog(settings))
    rows = []
    full = service.refresh()
    rows.append(["full build", len(full.indexed), f"{full.seconds:.2f} s"])
    idle = service.refresh()
    rows[-1].append(len(full.checked))
    rows.append(
        [
            "refresh, nothing changed",
            len(idle.indexed),
            f"{idle.seconds * 1000:.0f} ms",
            len(idle.checked),
        ]
    )
    changed = change_one_ledger(home, service)
    rows.append(
        [
            "refresh, one ledger changed",
            len(changed.indexed),
            f"{changed.seconds * 1000:.0f} ms",
            len(changed.checked),
        ]
    )
    return service, rows


def change_one_ledger(home: Path, service: IndexService):
    """Append one model call to a ledger, refresh, and put the ledger's bytes back."""
    session = next(
        s
        for s in manifest(home)["sessions"]
        if s.get("ledger") and s["kind"] == "ephemeral" and s.get("clean") and not s.get("live")
    )
    ledger = home / session["ledger"]
    backup = Path(tempfile.mkdtemp()) / "session.db"
    shutil.copy2(ledger, backup)
    try:
        writer = sqlite3.connect(ledger)
        writer.execute(
            "INSERT INTO model_calls (timestamp, provider, model, method, path, input_tokens,"
            " output_tokens) VALUES ('2026-08-02T10:00:00Z', 'anthropic', 'm', 'POST', '/v1', 1, 1)"
        )
        writer.commit()
        writer.close()
        return service.refresh()
    finally:
        shutil.copy2(backup, ledger)
        shutil.rmtree(backup.parent)
        service.refresh()


async def median_ms(datasette: Datasette, url: str, repeat: int) -> float:
    await datasette.client.get(url)  # warm-up: builds this sort order once
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = await datasette.client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
    return statistics.median(timings)


async def list_latency(home: Path, cache: Path, repeat: int) -> list[list]:
    plugin = {"capsem_home": str(home), "cache_dir": str(cache), "index_refresh_seconds": 0}
    datasette = Datasette(metadata={"plugins": {"datasette-capsem": plugin}})
    await datasette.invoke_startup()
    state = get_state(datasette)
    state.index.refresh()
    started = time.perf_counter()
    state.session_table.rows(state.catalog.snapshot(), state.index.snapshot())
    build_ms = (time.perf_counter() - started) * 1000
    rows = [["(rebuild of the in-memory list after a change)", f"{build_ms:.0f}", "", ""]]
    for query in FILTERS:
        page = await median_ms(datasette, f"/-/capsem?{query}", repeat)
        data = await median_ms(datasette, f"/-/capsem/sessions.json?{query}", repeat)
        count = (await datasette.client.get(f"/-/capsem/sessions.json?{query}")).json()["filtered"]
        rows.append([query or "(default)", f"{page:.1f}", f"{data:.1f}", count])
    biggest = await median_ms(datasette, "/-/capsem/sessions.json?_size=max&all=1", repeat)
    rows.append(["_size=max&all=1 (JSON, 1000 rows)", "", f"{biggest:.1f}", ""])
    charts = await median_ms(datasette, "/-/capsem/charts/usage.json?all=1", repeat)
    rows.append(["charts/usage.json?all=1", "", f"{charts:.1f}", ""])
    return rows


def build_script(home: Path, cache: Path) -> tuple[str, int]:
    """The sqlite3 shell script reading what a full index build (into `cache`) reads: for
    every ledger connection the build opened, `.open` of the same URI and the statements sent
    on it. The stand-ins of gz and WAL-without-shm ledgers stay in `cache` for the shell."""
    opened: list[tuple[str, list[str]]] = []
    connect = readonly.connect

    def traced(state, cache_dir):
        conn = connect(state, cache_dir)
        statements: list[str] = []
        opened.append((readonly.sqlite_uri(state, cache_dir), statements))
        conn.set_trace_callback(statements.append)
        return conn

    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache)})
    # Every ledger the build opens goes through connect(); in this process, so the statements
    # are seen here (a worker process's trace would be lost with it).
    readonly.connect, processes_from = traced, parallel.PROCESSES_FROM
    parallel.PROCESSES_FROM = sys.maxsize
    try:
        IndexService(settings, Catalog(settings)).refresh()
    finally:
        readonly.connect, parallel.PROCESSES_FROM = connect, processes_from
    parts, count = [], 0
    for uri, statements in opened:
        kept = [s for s in statements if "capsem_body_hash_verdict" not in s]
        parts.append(f".open '{uri.replace(chr(39), chr(39) * 2)}'\n" + cli_script(kept))
        count += len(kept)
    return "".join(parts), count


def build_vs_cli(home: Path, repeat: int) -> None:
    cli = sqlite3_cli()
    capture = Path(tempfile.mkdtemp(prefix="bench-index-capture-"))
    try:
        script, statements = build_script(home, capture)
        engine, shell, cpu = [], [], {"build": [], "cli": []}
        for _ in range(repeat):
            with tempfile.TemporaryDirectory(prefix="bench-index-") as cache:
                command = [
                    sys.executable,
                    "-m",
                    "datasette",
                    "capsem",
                    "index",
                    "--home",
                    str(home),
                    "--cache-dir",
                    cache,
                ]
                before, started = children_cpu(), time.perf_counter()
                subprocess.run(
                    command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
                )
                engine.append(time.perf_counter() - started)
                cpu["build"].append(children_cpu() - before)
            before = children_cpu()
            shell.append(cli_run(cli, [":memory:"], script))
            cpu["cli"].append(children_cpu() - before)
    finally:
        shutil.rmtree(capture, ignore_errors=True)
    print_table(
        f"Full index build vs the sqlite3 CLI reading the same rows ({os.cpu_count()} cores, "
        f"interleaved, median of {repeat}; load {load()})",
        ["what", "statements", "wall time", "vs sqlite3 CLI", "each run", "goal"],
        [
            [
                "sqlite3 CLI, same reads",
                statements,
                f"{statistics.median(shell):.2f} s",
                "1.00x",
                "",
                "",
            ],
            ratio_row("datasette capsem index (full build)", "", engine, shell, 1.5),
        ],
    )
    # The build's CPU is its process's and its worker processes' together: the workers are
    # waited for before the build exits, so their time is in RUSAGE_CHILDREN with its own.
    build_cpu, cli_cpu = statistics.median(cpu["build"]), statistics.median(cpu["cli"])
    print(
        f"CPU seconds (user + system, the build's worker processes included), medians: "
        f"build {build_cpu:.1f}, sqlite3 CLI {cli_cpu:.1f}, ratio {build_cpu / cli_cpu:.2f}x; "
        f"each run: build {', '.join(f'{c:.1f}' for c in cpu['build'])}, "
        f"CLI {', '.join(f'{c:.1f}' for c in cpu['cli'])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--build-vs-cli",
        type=int,
        default=0,
        metavar="N",
        help="also time the full build against the sqlite3 CLI, N runs each",
    )
    parser.add_argument(
        "--skip-list", action="store_true", help="only the build comparison (with --build-vs-cli)"
    )
    args = parser.parse_args()
    home = generated_home(args.sessions)
    sessions = len(manifest(home)["sessions"])
    if args.build_vs_cli:
        build_vs_cli(home, args.build_vs_cli)
        if args.skip_list:
            return
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        _service, index_rows = index_figures(home, cache)
        print_table(
            f"Cross-session index, {sessions} sessions (target: one changed ledger < 1 s)",
            ["refresh", "ledgers read", "time", "sessions checked (quick profile)"],
            index_rows,
        )
        list_rows = asyncio.run(list_latency(home, cache, args.repeat))
    print_table(
        f"Session list, median of {args.repeat} requests (target < {TARGET_MS} ms)",
        ["filter", "page ms", "JSON ms", "sessions"],
        list_rows,
    )


if __name__ == "__main__":
    main()
