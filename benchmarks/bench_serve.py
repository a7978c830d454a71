"""Serving 10,000 sessions: start time, memory, descriptors and page latency.

Compares the plugin over a generated 10,000-session home with plain `datasette serve` of one
session file, in the same run. Usage: python benchmarks/bench_serve.py [--sessions N]
"""

from __future__ import annotations

import argparse
import random

import httpx
from common import (
    generated_home,
    manifest,
    median_ms,
    open_fds,
    print_table,
    rss_mb,
    server,
    wait_for_index,
)

VISITS = 1000
SAMPLES = 60


def ledger_sessions(home) -> list[dict]:
    return [
        s
        for s in manifest(home)["sessions"]
        if s.get("ledger") and not s.get("broken") and s.get("counts", {}).get("model_calls")
    ]


def measure_plugin(home, sessions: list[dict]) -> dict:
    rng = random.Random(5)
    sample = rng.sample(sessions, min(SAMPLES, len(sessions)))
    with (
        server("--home", str(home), "--cache", str(home.parent / "cache-serve")) as (
            base,
            pid,
            start,
        ),
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        client.get("/")
        rss_idle = rss_mb(pid)
        visited = sessions[:VISITS]
        for session in visited:
            client.get(f"/{session['id']}/model_calls.json?_size=5")
        fds, rss = open_fds(pid), rss_mb(pid)
        wait_for_index(client)  # latency in the steady state, not during the first build
        # Latency with the mount table full (the steady state of a busy instance).
        hot = sample[:20]
        for session in hot:
            client.get(f"/{session['id']}.json")
        return {
            "start": start,
            "rss_idle": rss_idle,
            "rss": rss,
            "fds": fds,
            "visited": len(visited),
            "/": median_ms(client, ["/"] * 20),
            "/<id>": median_ms(client, [f"/{s['id']}" for s in hot], repeat=3),
            "/<id>/model_calls.json": median_ms(
                client, [f"/{s['id']}/model_calls.json" for s in hot], repeat=3
            ),
            "cold /<id>/model_calls.json": median_ms(
                client, [f"/{s['id']}/model_calls.json" for s in sample[20:]]
            ),
        }


def measure_plain(home, session: dict) -> dict:
    path = home / session["ledger"]
    name = path.stem
    with (
        server("--plain", str(path)) as (base, pid, start),
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        client.get("/")
        return {
            "start": start,
            "rss": rss_mb(pid),
            "fds": open_fds(pid),
            "/": median_ms(client, ["/"] * 20),
            "/<id>": median_ms(client, [f"/{name}"] * 20),
            "/<id>/model_calls.json": median_ms(client, [f"/{name}/model_calls.json"] * 20),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    home = generated_home(args.sessions)
    sessions = ledger_sessions(home)
    plugin = measure_plugin(home, sessions)
    plain = measure_plain(home, sessions[0])
    rows = [["server start (s)", f"{plugin['start']:.2f}", f"{plain['start']:.2f}", "", "< 2 s"]]
    for page in ("/", "/<id>", "/<id>/model_calls.json"):
        ratio = plugin[page] / plain[page]
        rows.append(
            [
                f"median {page} (ms)",
                f"{plugin[page]:.1f}",
                f"{plain[page]:.1f}",
                f"{ratio:.2f}x",
                "<= 1.5x",
            ]
        )
    rows += [
        [
            "cold (first visit, mounts) /<id>/model_calls.json (ms)",
            f"{plugin['cold /<id>/model_calls.json']:.1f}",
            "",
            "",
            "",
        ],
        ["RSS after start (MB)", f"{plugin['rss_idle']:.0f}", "", "", ""],
        [
            f"RSS after visiting {plugin['visited']} sessions (MB)",
            f"{plugin['rss']:.0f}",
            f"{plain['rss']:.0f}",
            "",
            "< 150 MB",
        ],
        [
            f"open fds after visiting {plugin['visited']} sessions",
            plugin["fds"],
            plain["fds"],
            "",
            "bounded by mount bound (32)",
        ],
    ]
    print_table(
        f"Serving {args.sessions} sessions ({len(sessions)} ledgers on disk) vs plain "
        "datasette serve of one session file",
        ["measure", "datasette-capsem", "plain datasette", "ratio", "target"],
        rows,
    )


if __name__ == "__main__":
    main()
