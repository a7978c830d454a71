"""Full-text search over the cross-session index of 10,000 generated sessions.

Measures, on a generated home (reused from benchmarks/out/):
- the full index build (figures, ids and the FTS5 table of masked text) and its size;
- the refresh after one ledger changed (target <= 1 s; the ledger's bytes are restored);
- median latency of text queries (target <= 100 ms): the index query alone
  (`IndexService.search_text`) and the whole `/-/capsem/search.json` page through Datasette's
  in-process ASGI client (text hits, plus the id lookup for one-word queries), after one
  warm-up request per query.

Usage: python benchmarks/bench_search.py [--sessions 10000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from bench_sessions import change_one_ledger
from common import generated_home, manifest, print_table
from datasette.app import Datasette

from datasette_capsem.state import get_state

QUERIES = [
    ("one common word", "build", {}),
    ("a phrase", '"python -m build"', {}),
    ("a prefix", "migrat*", {}),
    ("a domain", "api.anthropic.com", {}),
    ("two words OR", "pytest OR ruff", {}),
    ("a rare word", "capsem_timeline", {}),
    ("kind filter", "api*", {"kind": "dns"}),
    ("provider + date filter", "let", {"provider": "anthropic", "since": "2026-08-01"}),
    ("no match", "zzzznotthere", {}),
]
TARGET_MS = 100


def median(fn, repeat: int) -> float:
    fn()
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings)


async def page_median(datasette: Datasette, url: str, repeat: int) -> float:
    await datasette.client.get(url)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = await datasette.client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
    return statistics.median(timings)


async def run(home: Path, cache: Path, repeat: int) -> tuple[list, list]:
    plugin = {"capsem_home": str(home), "cache_dir": str(cache), "index_refresh_seconds": 0}
    datasette = Datasette(metadata={"plugins": {"datasette-capsem": plugin}})
    await datasette.invoke_startup()
    service = get_state(datasette).index
    full = service.refresh()
    conn = sqlite3.connect(service.path)
    documents = conn.execute("SELECT COUNT(*) FROM text_rows").fetchone()[0]
    conn.close()
    size_mb = sum(p.stat().st_size for p in service.path.parent.glob("index.db*")) / 2**20
    changed = change_one_ledger(home, service)
    idle = service.refresh()
    index_rows = [
        ["full build", len(full.indexed), f"{full.seconds:.1f} s"],
        ["documents in the FTS5 table", documents, f"index.db {size_mb:.0f} MiB"],
        ["refresh, one ledger changed", len(changed.indexed), f"{changed.seconds * 1000:.0f} ms"],
        ["refresh, nothing changed", len(idle.indexed), f"{idle.seconds * 1000:.0f} ms"],
    ]
    query_rows = []
    for label, query, params in QUERIES:
        result = service.search_text(query)
        total = result.total
        direct = median(lambda q=query: service.search_text(q, limit=50), repeat)
        url = f"/-/capsem/search.json?q={quote(query)}" + "".join(
            f"&{k}={quote(v)}" for k, v in params.items()
        )
        page = await page_median(datasette, url, repeat)
        query_rows.append(
            [
                label,
                query,
                f"{total:,}{'+' if result.total_capped else ''}",
                f"{direct:.1f}",
                f"{page:.1f}",
            ]
        )
    return index_rows, query_rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    home = generated_home(args.sessions)
    sessions = len(manifest(home)["sessions"])
    with tempfile.TemporaryDirectory() as tmp:
        index_rows, query_rows = asyncio.run(run(home, Path(tmp) / "cache", args.repeat))
    print_table(
        f"Cross-session index with text search, {sessions} sessions (target: one changed ledger <= 1 s)",
        ["refresh", "ledgers read", "time"],
        index_rows,
    )
    print_table(
        f"Text queries, median of {args.repeat} (target <= {TARGET_MS} ms)",
        ["query", "q", "matches", "index ms", "search.json ms"],
        query_rows,
    )


if __name__ == "__main__":
    main()
