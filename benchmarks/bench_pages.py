"""Issue 17's rows: every everyday page of a 10,000-session home beside plain Datasette.

Both servers run at once: the plugin over a working copy of the generated home (hard links, so
it costs no space; a ledger this script writes is first replaced by a private copy, so the
cached home is never changed) and plain `datasette serve` of one of its ledgers. Requests
alternate between the two (plugin page, plain table page, plugin page, ...), so both see the
same load from whatever else shares the machine; each row prints medians, p90 and the ratio
of medians to the plain table page. `--runs` repeats everything with fresh servers.

Rows: first visit of a session's table page (mounts it) and of its overview, the home page,
an event-id search (HTML and JSON), `/main/sessions.json`, the warm table page after visiting
1,000 sessions, RSS then, and how long a new session and a changed ledger take to show in
search and in the list (the index refreshes on its own; nothing is requested to help it).

Usage: python benchmarks/bench_pages.py [--sessions 10000] [--runs 2] [--requests 27]
       [--rows table,warm]   (a subset: table overview home search main warm rss fresh)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import time
import uuid
from pathlib import Path

import httpx
from common import (
    OUT,
    cpu_seconds,
    generated_home,
    manifest,
    print_table,
    rss_mb,
    server,
    wait_for_index,
    wait_until_idle,
)

VISITS = 1000
ROWS = ("table", "overview", "home", "search", "main", "warm", "rss", "fresh")


def working_copy(home: Path) -> Path:
    """A hard-linked copy of the home that this script may write into (made once)."""
    copy = home.with_name(home.name + "-work")
    if not (copy / "manifest.json").exists():
        shutil.rmtree(copy, ignore_errors=True)
        subprocess.run(["cp", "-al", str(home), str(copy)], check=True)
    return copy


def own_file(path: Path) -> None:
    """Replace a hard link by a private copy before writing to it."""
    if path.stat().st_nlink > 1:
        spare = path.with_name(path.name + ".copy")
        shutil.copyfile(path, spare)
        os.replace(spare, path)


def timed(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{url}: {response.status_code}")
    return elapsed


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]


def side_by_side(plugin, plain, plugin_urls, plain_url: str, pids: tuple[int, int]) -> tuple:
    """Alternate one plugin request with one plain request: both timings lists, and each
    server's CPU time per request (ms; all its threads, background work included), which the
    other jobs on the machine disturb much less than wall time."""
    ours, theirs = [], []
    cpu_before = [cpu_seconds(pid) for pid in pids]
    for url in plugin_urls:
        ours.append(timed(plugin, url))
        theirs.append(timed(plain, plain_url))
    cpu = [
        (cpu_seconds(pid) - b) * 1000 / len(plugin_urls)
        for pid, b in zip(pids, cpu_before, strict=True)
    ]
    return ours, theirs, cpu


def event_ids(ledger: Path, count: int) -> list[str]:
    conn = sqlite3.connect(f"file:{ledger}?immutable=1", uri=True)
    try:
        rows = conn.execute(
            "SELECT event_id FROM net_events WHERE event_id IS NOT NULL LIMIT ?", (count,)
        )
        return [row[0] for row in rows]
    finally:
        conn.close()


POLL_SECONDS = 0.1  # a reader reloading ten times a second; faster polls slow the server


def visible_after(client: httpx.Client, checks, seconds: float = 120) -> float:
    """Milliseconds until every check passes (polled every POLL_SECONDS), from now."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        if all(check(client) for check in checks):
            return (time.perf_counter() - started) * 1000
        time.sleep(POLL_SECONDS)
    return float("inf")


def search_finds(word: str, session_id: str, part: str = "text"):
    def check(client: httpx.Client) -> bool:
        found = client.get("/-/capsem/search.json", params={"q": word}).json()
        hits = found["text"]["hits"] if part == "text" else found["hits"]
        return any(hit["session_id"] == session_id for hit in hits)

    return check


def listed(session_id: str, test):
    def check(client: httpx.Client) -> bool:
        rows = client.get("/-/capsem/sessions.json", params={"q": session_id, "all": 1}).json()
        return any(row["id"] == session_id and test(row) for row in rows["sessions"])

    return check


def add_file_event(ledger: Path, marker: str) -> None:
    own_file(ledger)
    conn = sqlite3.connect(ledger)
    conn.execute(
        "INSERT INTO fs_events (timestamp, action, path) VALUES (?, 'created', ?)",
        (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), f"/work/{marker}.txt"),
    )
    conn.commit()
    conn.close()


def freshness(client: httpx.Client, home: Path, sessions: list[dict], rng) -> dict:
    """A changed ledger's new row, and a new session, in search and the list."""
    changed_ms, new_ms = [], []
    for _ in range(3):
        session = rng.choice(sessions)
        before = client.get(
            "/-/capsem/sessions.json", params={"q": session["id"], "all": 1}
        ).json()["sessions"][0]["verdict"]
        marker = "fresh" + uuid.uuid4().hex[:10]
        add_file_event(home / session["ledger"], marker)
        changed_ms.append(
            visible_after(
                client,
                [
                    search_finds(marker, session["id"]),
                    listed(session["id"], lambda row, b=before: row["verdict"] != b),
                ],
            )
        )
        donor = rng.choice(sessions)
        new_id = str(uuid.uuid4())
        target = home / "run" / "sessions" / new_id
        target.mkdir()
        shutil.copyfile(home / donor["ledger"], target / "session.db.tmp")
        marker = "fresh" + uuid.uuid4().hex[:10]
        add_file_event(target / "session.db.tmp", marker)
        os.replace(target / "session.db.tmp", target / "session.db")
        new_ms.append(
            visible_after(
                client,
                [search_finds(marker, new_id), listed(new_id, lambda row: row["indexed"])],
            )
        )
    return {"changed": changed_ms, "new": new_ms}


def one_run(
    home: Path, cache: Path, sessions: list[dict], requests: int, seed: int, wanted: set[str]
) -> dict:
    rng = random.Random(seed)
    pool = [s for s in sessions if not s.get("alias_of")]
    rng.shuffle(pool)
    plain_session = pool[0]
    plain_table = f"/{Path(plain_session['ledger']).stem}/model_calls"
    with (
        server("--home", str(home), "--cache", str(cache)) as (base, pid, _start),
        server("--plain", str(home / plain_session["ledger"])) as (plain_base, plain_pid, _s),
        httpx.Client(base_url=base, timeout=120) as plugin,
        httpx.Client(base_url=plain_base, timeout=120) as plain,
    ):
        wait_for_index(plugin)
        for client, url in ((plugin, "/"), (plain, plain_table), (plain, plain_table)):
            client.get(url)
        wait_until_idle(pid)
        pids = (pid, plain_pid)
        rss_start = (rss_mb(pid), rss_mb(plain_pid))
        cold = iter(pool[1:])
        rows: dict[str, tuple] = {}
        if "table" in wanted:
            rows["first visit of a session table page"] = side_by_side(
                plugin,
                plain,
                [f"/{next(cold)['id']}/model_calls" for _ in range(requests)],
                plain_table,
                pids,
            )
        if "overview" in wanted:
            rows["first visit of a session overview"] = side_by_side(
                plugin,
                plain,
                [f"/-/capsem/sessions/{next(cold)['id']}" for _ in range(requests)],
                plain_table,
                pids,
            )
        if "home" in wanted:
            rows["home `/`"] = side_by_side(plugin, plain, ["/"] * requests, plain_table, pids)
        if "search" in wanted:
            ids = []
            while len(ids) < requests:
                session = next(cold)
                ids += [(session["id"], e) for e in event_ids(home / session["ledger"], 1)]
            rows["search an event id (HTML)"] = side_by_side(
                plugin, plain, [f"/-/capsem/search?q={e}" for _, e in ids], plain_table, pids
            )
            rows["search an event id (JSON)"] = side_by_side(
                plugin, plain, [f"/-/capsem/search.json?q={e}" for _, e in ids], plain_table, pids
            )
        if "main" in wanted:
            rows["`/main/sessions.json`"] = side_by_side(
                plugin, plain, ["/main/sessions.json"] * requests, plain_table, pids
            )
        rss = (float("nan"), float("nan"))
        if wanted & {"warm", "rss"}:
            visited = pool[1 : VISITS + 1]
            for session in visited:
                plugin.get(f"/{session['id']}/model_calls.json?_size=5")
            rss = (rss_mb(pid), rss_mb(plain_pid))
            wait_until_idle(pid)
            if "warm" in wanted:
                recent = visited[-20:]
                rows[f"warm table page after visiting {VISITS:,} sessions"] = side_by_side(
                    plugin,
                    plain,
                    [f"/{recent[i % len(recent)]['id']}/model_calls" for i in range(requests)],
                    plain_table,
                    pids,
                )
        fresh = (
            freshness(plugin, home, pool[VISITS + 1 :], rng)
            if "fresh" in wanted
            else {"changed": [], "new": []}
        )
    return {"rows": rows, "rss_start": rss_start, "rss": rss, "fresh": fresh}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--requests", type=int, default=27)
    parser.add_argument(
        "--rows", default=",".join(ROWS), help=f"comma-separated subset of {', '.join(ROWS)}"
    )
    args = parser.parse_args()
    wanted = set(args.rows.split(","))
    if unknown := wanted - set(ROWS):
        parser.error(f"unknown rows: {', '.join(sorted(unknown))}")
    home = working_copy(generated_home(args.sessions))
    sessions = [
        s
        for s in manifest(home)["sessions"]
        if s.get("ledger") and s.get("clean") and s.get("counts", {}).get("model_calls")
    ]
    cache = OUT / f"cache-pages-{args.sessions}"
    for run in range(1, args.runs + 1):
        result = one_run(home, cache, sessions, args.requests, seed=run, wanted=wanted)
        table = []
        for name, (ours, theirs, cpu) in result["rows"].items():
            table.append(
                [
                    name,
                    f"{statistics.median(ours):.1f} / {p90(ours):.1f}",
                    f"{statistics.median(theirs):.1f} / {p90(theirs):.1f}",
                    f"{statistics.median(ours) / statistics.median(theirs):.2f}x",
                    f"{cpu[0]:.1f} / {cpu[1]:.1f} = {cpu[0] / cpu[1]:.2f}x",
                ]
            )
        for label, (ours, theirs) in (
            ("RSS at start, index built (MB)", result["rss_start"]),
            (f"RSS after visiting {VISITS:,} sessions (MB)", result["rss"]),
        ):
            if ours == ours:  # not NaN: measured
                table.append([label, f"{ours:.0f}", f"{theirs:.0f} (plain's RSS)", "", ""])
        for name, key in (("a changed ledger", "changed"), ("a new session", "new")):
            if not (values := result["fresh"][key]):
                continue
            table.append(
                [
                    f"{name} in search and the list (ms, each)",
                    ", ".join(f"{v:.0f}" for v in values),
                    "",
                    "",
                    "",
                ]
            )
        print_table(
            f"Run {run}: {args.sessions:,}-session home vs plain datasette serve of one ledger, "
            f"{args.requests} requests each, interleaved",
            [
                "page",
                "capsem median / p90 ms",
                "plain table page median / p90 ms",
                "ratio",
                "server CPU ms/request, capsem / plain",
            ],
            table,
        )


if __name__ == "__main__":
    main()
