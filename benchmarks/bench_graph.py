"""The trace explorer: a 500-model-call trace, and finding one id among 1,000 sessions.

Measures, on generated homes (reused from benchmarks/out/), through Datasette's in-process
ASGI client after one warm-up request per URL:
- the trace page (HTML), graph.json, the trace's .json and its OTLP export for a trace of 500
  model calls (target: page and graph.json under 1 s), once for a reader allowed to see
  secrets and once for a default reader (every text response is masked);
- search of one trace id over 1,000 sessions with the cross-session index built (target
  under 100 ms) and without it (the bounded fallback scan, plus an unbounded scan for scale).

Usage: python benchmarks/bench_graph.py [--repeat 7] [--sessions 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from common import generated_home, manifest, print_table
from datasette.app import Datasette

from datasette_capsem.graph.search import scan_ledgers
from datasette_capsem.state import get_state

CALLS = 500
PAGE_TARGET_MS = 1000
SEARCH_TARGET_MS = 100


async def instance(home: Path, cache: Path, **config) -> Datasette:
    plugin = {"capsem_home": str(home), "cache_dir": str(cache), "index_refresh_seconds": 0}
    datasette = Datasette(metadata={"plugins": {"datasette-capsem": {**plugin, **config}}})
    await datasette.invoke_startup()
    return datasette


async def timed(datasette: Datasette, url: str, repeat: int) -> tuple[float, int, int]:
    """(median ms, status, bytes) after one warm-up request."""
    await datasette.client.get(url)
    timings, response = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        response = await datasette.client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), response.status_code, len(response.content)


def long_trace(home: Path) -> tuple[str, str]:
    """The current-era session and trace with the most model calls."""
    found = manifest(home)
    session = max(
        (s for s in found["sessions"] if s.get("era") == "current" and s.get("traces")),
        key=lambda s: s["counts"].get("model_calls", 0) / max(len(s["traces"]), 1),
    )
    return session["id"], session["traces"][0]


async def trace_rows(repeat: int) -> list[list]:
    home = generated_home(
        1,
        traces_per_session=1,
        calls_per_trace=CALLS,
        defects=False,
        hostile=False,
        broken=False,
    )
    session_id, trace = long_trace(home)
    base = f"/-/capsem/sessions/{session_id}/traces/{trace}"
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-graph-") as tmp:
        for reader, config in (("may see secrets", {"view_secrets": True}), ("default", {})):
            datasette = await instance(home, Path(tmp) / reader.replace(" ", "-"), **config)
            graph = (await datasette.client.get(base + "/graph.json")).json()
            for label, suffix, target in (
                ("trace page (HTML)", "", PAGE_TARGET_MS),
                ("graph.json", "/graph.json", PAGE_TARGET_MS),
                ("trace .json", ".json", None),
                ("OTLP export", ".otlp.json", None),
            ):
                ms, status, size = await timed(datasette, base + suffix, repeat)
                verdict = "" if target is None else ("ok" if ms < target else "OVER")
                rows.append(
                    [label, reader, status, f"{size / 1024:.0f} KB", f"{ms:.0f} ms", verdict]
                )
    calls = sum(1 for n in graph["nodes"] if n["type"] == "model_call")
    print(
        f"trace {trace}: {calls} model calls, {len(graph['nodes'])} nodes, "
        f"{len(graph['edges'])} edges"
    )
    return rows


async def search_rows(sessions: int, repeat: int) -> list[list]:
    home = generated_home(sessions)
    found = manifest(home)
    wanted = next(s for s in found["sessions"] if s.get("traces"))["traces"][0]
    url = f"/-/capsem/search.json?q={wanted}"
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        plain = await instance(home, Path(tmp) / "plain")
        ms, status, _ = await timed(plain, url, max(repeat // 2, 2))
        scan = (await plain.client.get(url)).json()["scan"]
        rows.append(
            [
                "no index: bounded scan",
                status,
                f"{scan['scanned']}/{scan['wanted']} ledgers",
                f"{ms:.0f} ms",
                "partial" if not scan["complete"] else "complete",
            ]
        )
        started = time.perf_counter()
        ledgers = [
            (s.id, s.ledger_path)
            for s in get_state(plain).catalog.sessions()
            if s.ledger_path is not None
        ]
        hits, report = scan_ledgers(
            ledgers, wanted, Path(tmp) / "plain", max_ledgers=10**9, seconds=3600
        )
        rows.append(
            [
                "no index: full scan",
                "-",
                f"{report.scanned}/{report.wanted} ledgers",
                f"{(time.perf_counter() - started) * 1000:.0f} ms",
                f"{len(hits)} hits",
            ]
        )
        indexed = await instance(home, Path(tmp) / "indexed")
        report = get_state(indexed).index.refresh()
        ms, status, _ = await timed(indexed, url, repeat)
        data = (await indexed.client.get(url)).json()
        rows.append(
            [
                "with index",
                status,
                f"{data['index']['covered']} covered, {data['scan']['wanted']} scanned",
                f"{ms:.1f} ms",
                "ok" if ms < SEARCH_TARGET_MS else "OVER",
            ]
        )
        print(
            f"index build for {sessions} sessions: {report.seconds:.1f} s "
            f"({len(report.indexed)} ledgers)"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    page = asyncio.run(trace_rows(args.repeat))
    print_table(
        f"Trace of {CALLS} model calls (median of {args.repeat}, target < {PAGE_TARGET_MS} ms)",
        ["request", "reader", "status", "size", "median", "target"],
        page,
    )
    search = asyncio.run(search_rows(args.sessions, args.repeat))
    print_table(
        f"Search one trace id over {args.sessions} sessions (target < {SEARCH_TARGET_MS} ms "
        "with the index)",
        ["search", "status", "covered", "median", "result"],
        search,
    )


if __name__ == "__main__":
    main()
