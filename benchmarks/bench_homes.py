"""Many homes against one: the session list and search over 10 homes x 1,000 sessions beside
one home of 10,000, in the same run.

Both instances are built the same way (in-process Datasette, the cross-session index refreshed
to completion first), then each URL is asked once to warm up and `--repeat` times measured,
alternating between the two instances so the machine's load falls on both alike. The ratio
(many homes / one home) should be close to 1: the list and the index hold every home's
sessions in one table, so a request's cost depends on the number of sessions, not of homes.

Usage: python benchmarks/bench_homes.py [--homes 10] [--sessions 1000] [--repeat 15]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from common import OUT, generated_home, manifest, print_table
from datasette.app import Datasette

from datasette_capsem.state import get_state

URLS = [
    ("list page (default)", "/-/capsem"),
    ("list JSON (default)", "/-/capsem/sessions.json"),
    ("list JSON, _size=max&all=1", "/-/capsem/sessions.json?_size=max&all=1"),
    ("list JSON, with_model&_sort=cost", "/-/capsem/sessions.json?with_model=1&_sort=cost"),
    ("list JSON, q=co-work", "/-/capsem/sessions.json?q=co-work"),
    ("list JSON, has_errors", "/-/capsem/sessions.json?has_errors=1"),
    ("charts/usage.json?all=1", "/-/capsem/charts/usage.json?all=1"),
    ("search: one common word", "/-/capsem/search.json?q=build"),
    ("search: a phrase", "/-/capsem/search.json?q=%22python+-m+build%22"),
    ("search: a prefix", "/-/capsem/search.json?q=migrat*"),
    ("search: no match", "/-/capsem/search.json?q=zzzznotthere"),
]


async def instance(cache: Path, **homes) -> tuple[Datasette, float]:
    """A started instance over `homes` (capsem_home, or homes_dir), its index built."""
    plugin = {"cache_dir": str(cache), "index_refresh_seconds": 0, **homes}
    datasette = Datasette(metadata={"plugins": {"datasette-capsem": plugin}})
    await datasette.invoke_startup()
    started = time.perf_counter()
    get_state(datasette).index.refresh()
    return datasette, time.perf_counter() - started


async def timed(datasette: Datasette, url: str) -> float:
    started = time.perf_counter()
    response = await datasette.client.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code not in (200, 300):
        raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
    return elapsed


async def matched(datasette: Datasette, url: str) -> str:
    """What the request found (sessions listed, or text hits) and its size in KB."""
    response = await datasette.client.get(url)
    size = f"{len(response.content) / 1024:.0f} KB"
    if "json" not in url:
        return size
    body = response.json()
    if "text" in body:  # search: text hits (capped like the page) and sessions by id
        found = f"{body['text']['total']}{'+' if body['text']['total_capped'] else ''} hits"
    elif "rows" in body:  # a chart
        found = f"{len(body['rows'])} rows"
    else:
        found = f"{body['filtered']} sessions"
    return f"{found}, {size}"


async def side_by_side(one: Datasette, many: Datasette, repeat: int) -> list[list]:
    rows = []
    for label, url in URLS:
        await timed(one, url)  # warm-up: builds this sort order or fills the page cache once
        await timed(many, url)
        ones, manys = [], []
        for _ in range(repeat):
            ones.append(await timed(one, url))
            manys.append(await timed(many, url))
        a, b = statistics.median(ones), statistics.median(manys)
        found = f"{await matched(one, url)}; {await matched(many, url)}"
        rows.append([label, f"{a:.1f}", f"{b:.1f}", f"{b / a:.2f}", found])
    return rows


def homes_dir(root: Path, homes: int, sessions: int) -> tuple[Path, int]:
    """`homes` generated homes of `sessions` each, linked into one homes_dir as m0, m1, …"""
    root.mkdir(exist_ok=True)
    total = 0
    for number in range(homes):
        home = generated_home(sessions, seed=101 + number)
        if not (root / f"m{number}").exists():
            (root / f"m{number}").symlink_to(home)
        total += len(manifest(home)["sessions"])
    return root, total


async def run(args) -> None:
    one_home = generated_home(args.homes * args.sessions)
    # Homes and caches kept in benchmarks/out/: a second run only refreshes the indexes.
    name = f"{args.homes}x{args.sessions}"
    many_root, many_sessions = homes_dir(OUT / f"homes-{name}", args.homes, args.sessions)
    one, one_build = await instance(OUT / f"cache-homes-{name}-one", capsem_home=str(one_home))
    many, many_build = await instance(OUT / f"cache-homes-{name}-many", homes_dir=str(many_root))
    one_sessions = len(get_state(one).catalog.snapshot().sessions)
    listed = len(get_state(many).catalog.snapshot().sessions)
    assert listed == many_sessions, (listed, many_sessions)
    print_table(
        "Index refresh (a full build when benchmarks/out/ holds no cache yet)",
        ["instance", "sessions", "refresh s"],
        [
            ["one home", one_sessions, f"{one_build:.1f}"],
            [f"{args.homes} homes x {args.sessions}", many_sessions, f"{many_build:.1f}"],
        ],
    )
    rows = await side_by_side(one, many, args.repeat)
    print_table(
        f"Median of {args.repeat} requests, ms: one home of {one_sessions} sessions against "
        f"{args.homes} homes x {args.sessions} ({many_sessions} sessions); ratio many / one",
        [
            "request",
            "one home ms",
            f"{args.homes} homes ms",
            "ratio",
            "found, size: one home; many homes",
        ],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--homes", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
