"""Load: 50 concurrent clients for 60 s against a 10,000-session home, loopback only.

Drives the JSON endpoints and pages a team uses; reports throughput, p50/p99 and errors.
Bounded in time (--seconds) and count (--max-requests). Usage:
    python benchmarks/bench_load.py [--sessions 10000] [--clients 50] [--seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

import httpx
from common import HERE, generated_home, manifest, print_table, server, wait_for_index


def target_urls(home) -> list[str]:
    sessions = [s for s in manifest(home)["sessions"] if s.get("ledger") and not s.get("broken")]
    rng = random.Random(3)
    picked = rng.sample(sessions, min(200, len(sessions)))
    urls = [
        "/",
        "/-/capsem/sessions.json",
        "/-/capsem/sessions.json?with_model=1&_size=20",
        "/main/sessions.json?_size=10",
    ]
    for session in picked:
        sid = session["id"]
        urls += [
            f"/{sid}.json",
            f"/{sid}/model_calls.json?_size=10",
            f"/-/capsem/sessions/{sid}.json",
        ]
    return urls


async def client_loop(base, urls, deadline, budget, results, rng):
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        while time.perf_counter() < deadline and budget[0] > 0:
            budget[0] -= 1
            url = rng.choice(urls)
            started = time.perf_counter()
            try:
                response = await client.get(url)
                status = response.status_code
            except httpx.HTTPError as error:
                status = repr(error)
            results.append((url, status, (time.perf_counter() - started) * 1000))


async def run_load(base, urls, clients, seconds, max_requests):
    results: list = []
    budget = [max_requests]
    deadline = time.perf_counter() + seconds
    rngs = [random.Random(i) for i in range(clients)]
    started = time.perf_counter()
    await asyncio.gather(*(client_loop(base, urls, deadline, budget, results, rng) for rng in rngs))
    return results, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--max-requests", type=int, default=200_000)
    args = parser.parse_args()
    home = generated_home(args.sessions)
    urls = target_urls(home)
    cache = home.parent / "cache-load"
    team = ("--redact", "--settings", str(HERE.parent / "settings.json"))
    with server("--home", str(home), "--cache", str(cache), *team) as (base, _pid, _start):
        with httpx.Client(base_url=base, timeout=60) as client:
            waited = wait_for_index(client)
        print(f"index built in the background in {waited:.0f} s; starting the load")
        results, elapsed = asyncio.run(
            run_load(base, urls, args.clients, args.seconds, args.max_requests)
        )
    latencies = sorted(ms for _, status, ms in results)
    errors = [(u, s) for u, s, _ in results if not (isinstance(s, int) and s < 500)]
    not_ok = [(u, s) for u, s, _ in results if isinstance(s, int) and 400 <= s < 500]
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    print_table(
        f"Load: {args.clients} clients for {args.seconds:.0f} s, {len(urls)} URLs, "
        f"{args.sessions} sessions, team settings (settings.json), secrets masked",
        [
            "requests",
            "errors (5xx/transport)",
            "4xx",
            "throughput (req/s)",
            "p50 (ms)",
            "p99 (ms)",
            "mean (ms)",
        ],
        [
            [
                len(results),
                len(errors),
                len(not_ok),
                f"{len(results) / elapsed:.0f}",
                f"{p(0.5):.0f}",
                f"{p(0.99):.0f}",
                f"{statistics.mean(latencies):.0f}",
            ]
        ],
    )
    for url, status in errors[:10]:
        print("error:", url, status)


if __name__ == "__main__":
    main()
