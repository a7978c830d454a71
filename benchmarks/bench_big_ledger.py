"""Issue 29's one big ledger: every slow page of a 300,000-row session beside plain Datasette.

The home is `datasette capsem generate --big-session-rows 300000` (the curated sessions plus
one persistent session of about 300,000 rows), generated once into benchmarks/out/. Three
servers run at once: the plugin as the operator (may see secrets), the plugin as a viewer
(secrets masked, as a team instance serves a reader without `view_secrets`), and plain
`datasette serve` of the big ledger alone. Requests alternate (operator page, plain table
page, viewer page, plain table page, ...), so all three see the same load from whatever else
shares the machine; each row prints medians, p90 and the ratio of medians to plain
Datasette's table page of the same file (`/session/net_events`).

Rows, each as the operator and as the viewer:
- a prefix search, `/-/capsem/search?q=a*` (HTML and JSON);
- the check page `/-/capsem/sessions/ID/check`: the first view of a run (an empty report
  store; a 202 "being computed" answer is followed until the report is there, and that time
  printed) and then views of the unchanged file;
- the session overview: the first view of a run, then again;
- a table page with many facets (`event_body_blobs`, its largest table, faceted by six
  columns), beside plain Datasette's answer to the same URL;
- the trace page on a cold cache: the first trace page of a run (the rule book's row verdicts
  of the whole file are computed then), and then a trace not viewed before on each request;
- the session's timeline (every row in time order, a page of 200): the first view, then again;
- the tail page (`/tail`: the newest rows of every table): the first view, then again;
- the event page of an event id: the first of the run, then an event not viewed before on
  each request (tool calls and model calls in turn: the tables without an event_id index);
- `conversation.json` of a trace: the first of the run, then a trace not viewed before;
- with `--cold`, the trace page, `tree.json` and `conversation.json` of a trace not viewed
  before once more, the big ledger dropped from the OS's cache before each request.

Each run starts fresh servers with empty report and trace stores, but for the quick reports
the index build stores (the cross-session index is kept in benchmarks/out/ between runs, as a
server keeps it between restarts).

With `--cold`, the run serves a fresh copy of the home in a temporary directory under
benchmarks/out/ (deleted at the end) and, right before each "first" row, drops the big
ledger's pages of that copy from the OS's cache (`posix_fadvise(DONTNEED)`, which needs no
root and changes no byte): those rows then read a file the OS no longer caches, as the first
view of a big session on a busy server does. The fraction of the file still cached is printed
beside each (from `fincore`, when installed).

Usage: python benchmarks/bench_big_ledger.py [--rows 300000] [--runs 2] [--requests 15]
       [--pages search,check,overview,facets,trace,timeline,tail,event,conversation] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
from common import (
    OUT,
    cpu_seconds,
    generated_home,
    manifest,
    print_table,
    server,
    wait_for_index,
    wait_until_idle,
)

PAGES = (
    "search",
    "check",
    "overview",
    "facets",
    "trace",
    "timeline",
    "tail",
    "event",
    "conversation",
)
FACET_TABLE = "event_body_blobs"
FACETS = ("event_type", "source_table", "direction", "content_type", "truncated", "trace_id")
PLAIN_TABLE = "/session/net_events"
ROLES = ("operator", "viewer")
# Plain Datasette's table page of a file the OS no longer caches may overrun its SQL time
# limit under load (its count of every row: a 400 "SQL Interrupted"; or its own schema
# read: a 500): timed as its answer.
PLAIN_ANSWERS = (200, 400, 500)


def big_session(home: Path) -> tuple[str, Path]:
    sessions = [s for s in manifest(home)["sessions"] if s["ledger"] and not s["alias_of"]]
    big = max(sessions, key=lambda s: sum(s["counts"].values()))
    return big["id"], home / big["ledger"]


def trace_ids(ledger: Path, count: int) -> list[str]:
    """Traces of the big ledger, in a fixed order (each holds 10 model calls)."""
    conn = sqlite3.connect(f"file:{ledger}?immutable=1", uri=True)
    try:
        rows = conn.execute(
            "SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL "
            "GROUP BY trace_id ORDER BY min(id) LIMIT ?",
            (count,),
        )
        return [row[0] for row in rows]
    finally:
        conn.close()


def event_ids(ledger: Path, count: int) -> list[str]:
    """Event ids of the big ledger's tool calls and model calls, in turn, newest first."""
    conn = sqlite3.connect(f"file:{ledger}?immutable=1", uri=True)
    try:
        found = []
        for table in ("tool_calls", "model_calls"):
            sql = f"SELECT event_id FROM {table} ORDER BY id DESC LIMIT ?"  # a fixed name
            found.append([row[0] for row in conn.execute(sql, (count,))])
        return [e for pair in zip(*found, strict=False) for e in pair][:count]
    finally:
        conn.close()


def timed(client: httpx.Client, url: str, accept: tuple[int, ...] = (200,)) -> float:
    return timed_status(client, url, accept)[0]


def timed_status(
    client: httpx.Client, url: str, accept: tuple[int, ...] = (200,)
) -> tuple[float, int]:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code not in accept:
        raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
    return elapsed, response.status_code


def ready_after(client: httpx.Client, url: str, seconds: float = 300) -> float:
    """Seconds until a page answering 202 (being computed in the background) answers 200,
    reloading it every quarter of a second as its page does every two."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        if client.get(url).status_code == 200:
            break
        time.sleep(0.25)
    return time.perf_counter() - started


def drop_cached(path: Path) -> str:
    """Drop `path`'s pages from the OS's cache (no root needed, no byte changed); returns the
    part still cached after, as `fincore` reports it ("" without fincore)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if shutil.which("fincore") is None:
        return ""
    found = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    resident = int(found.stdout.strip() or 0)
    return f"{resident / max(path.stat().st_size, 1):.1%} of the file cached"


def fresh_copy(home: Path, into: Path) -> Path:
    """A copy of `home` under `into`, written to disk (so its pages can be dropped)."""
    copy = into / home.name
    shutil.copytree(home, copy, symlinks=True)
    for path in copy.rglob("*"):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    return copy


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]


def cold_stores(cache: Path) -> None:
    """Empty the trace store and the report store of a cache, but for the quick reports the
    index build stores for every session (a running server has them; the index stays)."""
    for found in cache.rglob("traces"):
        if found.is_dir():
            shutil.rmtree(found)
    for found in cache.rglob("reports"):
        for path in found.glob("*.json.z") if found.is_dir() else ():
            with open(path, "rb") as stream:
                if json.loads(stream.readline()).get("profile") != "quick":
                    path.unlink()


class Bench:
    """The three servers of one run and the rows measured on them."""

    def __init__(
        self, clients: dict[str, httpx.Client], pids: dict[str, int], cold: Path | None = None
    ):
        self.clients, self.pids = clients, pids
        self.cold = cold  # the ledger whose pages each "first" row drops from the OS's cache
        self.rows: list[list[str]] = []

    def side_by_side(
        self, name: str, urls: dict[str, list[str]], plain_urls: list[str], cold: bool = False
    ):
        """Alternate each role's request with one plain request; a row per role. `cold`: with
        `--cold`, the big ledger's pages are dropped from the OS's cache before each request
        of a role (each is then the first read of a file no longer cached)."""
        timings = {role: [] for role in (*ROLES, "plain")}
        pending = dict.fromkeys(ROLES, 0)  # answers 202: "being computed", at once
        cpu_before = {role: cpu_seconds(pid) for role, pid in self.pids.items()}
        count = len(plain_urls)
        for index in range(count):
            for role in ROLES:
                if cold and self.cold is not None:
                    drop_cached(self.cold)
                took, status = timed_status(self.clients[role], urls[role][index], (200, 202))
                timings[role].append(took)
                pending[role] += status == 202
                timings["plain"].append(
                    timed(self.clients["plain"], plain_urls[index], PLAIN_ANSWERS)
                )
        cpu = {
            role: (cpu_seconds(pid) - cpu_before[role]) * 1000 / count
            for role, pid in self.pids.items()
        }
        plain = statistics.median(timings["plain"])
        for role in ROLES:
            ours = timings[role]
            self.rows.append(
                [
                    f"{name}, {role}",
                    f"{statistics.median(ours):.0f} / {p90(ours):.0f}",
                    f"{plain:.0f} / {p90(timings['plain']):.0f}",
                    f"{statistics.median(ours) / plain:.2f}x",
                    f"{max(ours):.0f}",
                    f"{cpu[role]:.0f} / {cpu['plain'] / len(ROLES):.0f}"
                    + (f"; {pending[role]} of {count} answered 202" if pending[role] else ""),
                ]
            )

    def first(self, name: str, url: str, plain_url: str = PLAIN_TABLE):
        """One request per role (the first of its kind in the run), beside one plain one; a
        202 (the answer being computed in the background) is followed until the page is
        ready, and that time reported too."""
        for role in ROLES:
            cached = drop_cached(self.cold) if self.cold is not None else ""
            ours, status = timed_status(self.clients[role], url, (200, 202))
            plain = timed(self.clients["plain"], plain_url, PLAIN_ANSWERS)
            note = f"cold: {cached}; " if self.cold is not None else ""
            if status == 202:
                note += f"202 at once; ready after {ready_after(self.clients[role], url):.1f} s"
            self.rows.append(
                [f"{name}, {role} (one request)", f"{ours:.0f}", f"{plain:.0f}", "", "", note]
            )


def one_run(
    home: Path, session_id: str, ledger: Path, args, run: int, caches_in: Path = OUT
) -> list[list[str]]:
    caches = {role: caches_in / f"cache-big-ledger-{args.rows}-{role}" for role in ROLES}
    for cache in caches.values():
        cold_stores(cache)
    wanted = set(args.pages.split(","))
    n = args.requests
    traces = trace_ids(ledger, 2 + 6 * n * len(ROLES))
    with (
        server("--home", str(home), "--cache", str(caches["operator"])) as (op_base, op_pid, _),
        server("--home", str(home), "--cache", str(caches["viewer"]), "--redact") as (
            viewer_base,
            viewer_pid,
            _,
        ),
        server("--plain", str(ledger)) as (plain_base, plain_pid, _),
        httpx.Client(base_url=op_base, timeout=300) as operator,
        httpx.Client(base_url=viewer_base, timeout=300) as viewer,
        httpx.Client(base_url=plain_base, timeout=300) as plain,
    ):
        clients = {"operator": operator, "viewer": viewer, "plain": plain}
        pids = {"operator": op_pid, "viewer": viewer_pid, "plain": plain_pid}
        for role in ROLES:
            wait_for_index(clients[role])
        for role in ROLES:
            wait_until_idle(pids[role], seconds=600)
            clients[role].get(f"/{session_id}/net_events?_size=1")  # mounted, as after a visit
        plain.get(PLAIN_TABLE)
        bench = Bench(clients, pids, ledger if args.cold else None)
        session = f"/-/capsem/sessions/{session_id}"
        plain_urls = [PLAIN_TABLE] * n
        if "trace" in wanted:
            bench.first("trace page, first of the run", f"{session}/traces/{traces[0]}")
            fresh = iter(traces[1:])
            urls = {r: [f"{session}/traces/{next(fresh)}" for _ in range(n)] for r in ROLES}
            bench.side_by_side("trace page, a trace not viewed before", urls, plain_urls)
            urls = {
                r: [f"{session}/traces/{next(fresh)}/tree.json" for _ in range(n)] for r in ROLES
            }
            bench.side_by_side("tree.json of a trace not viewed before", urls, plain_urls)
            if args.cold:
                urls = {r: [f"{session}/traces/{next(fresh)}" for _ in range(n)] for r in ROLES}
                name = "trace page, a trace not viewed before, file cold"
                bench.side_by_side(name, urls, plain_urls, cold=True)
                urls = {
                    r: [f"{session}/traces/{next(fresh)}/tree.json" for _ in range(n)]
                    for r in ROLES
                }
                name = "tree.json of a trace not viewed before, file cold"
                bench.side_by_side(name, urls, plain_urls, cold=True)
        if "check" in wanted:
            bench.first("check page, first view (empty report store)", f"{session}/check")
            same = {role: [f"{session}/check"] * n for role in ROLES}
            bench.side_by_side("check page, unchanged file", same, plain_urls)
        if "overview" in wanted:
            bench.first("overview, first view", session)
            same = {role: [session] * n for role in ROLES}
            bench.side_by_side("overview, again", same, plain_urls)
        if "facets" in wanted:
            facets = "&".join(f"_facet={f}" for f in FACETS)
            url = f"/{session_id}/{FACET_TABLE}?{facets}"
            plain_facets = f"/session/{FACET_TABLE}?{facets}"
            bench.first(f"{FACET_TABLE} with {len(FACETS)} facets, first view", url, plain_facets)
            same = {role: [url] * n for role in ROLES}
            bench.side_by_side(
                f"{FACET_TABLE} with {len(FACETS)} facets (plain: the same URL)",
                same,
                [plain_facets] * n,
            )
        if "timeline" in wanted:
            bench.first("timeline, first view", f"{session}/timeline")
            same = {role: [f"{session}/timeline"] * n for role in ROLES}
            bench.side_by_side("timeline, again", same, plain_urls)
        if "tail" in wanted:
            bench.first("tail page, first view", f"{session}/tail")
            same = {role: [f"{session}/tail"] * n for role in ROLES}
            bench.side_by_side("tail page, again", same, plain_urls)
        if "event" in wanted:
            events = iter(event_ids(ledger, 1 + n * len(ROLES)))
            bench.first("event page, first of the run", f"{session}/events/{next(events)}")
            urls = {r: [f"{session}/events/{next(events)}" for _ in range(n)] for r in ROLES}
            bench.side_by_side("event page, an event not viewed before", urls, plain_urls)
        if "conversation" in wanted:
            fresh = iter(traces[::-1])  # the newest traces: not those the trace rows viewed
            first = f"{session}/traces/{next(fresh)}/conversation.json"
            bench.first("conversation.json, first of the run", first)
            urls = {
                r: [f"{session}/traces/{next(fresh)}/conversation.json" for _ in range(n)]
                for r in ROLES
            }
            bench.side_by_side("conversation.json of a trace not viewed before", urls, plain_urls)
            if args.cold:
                urls = {
                    r: [f"{session}/traces/{next(fresh)}/conversation.json" for _ in range(n)]
                    for r in ROLES
                }
                name = "conversation.json of a trace not viewed before, file cold"
                bench.side_by_side(name, urls, plain_urls, cold=True)
        if "search" in wanted:
            for suffix in ("", ".json"):
                same = {role: [f"/-/capsem/search{suffix}?q=a*"] * n for role in ROLES}
                bench.side_by_side(f"prefix search q=a*{suffix or ' (HTML)'}", same, plain_urls)
        return bench.rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--pages", default=",".join(PAGES))
    parser.add_argument(
        "--cold", action="store_true", help="first views read a file the OS does not cache"
    )
    args = parser.parse_args()
    if unknown := set(args.pages.split(",")) - set(PAGES):
        parser.error(f"unknown pages: {', '.join(sorted(unknown))}")
    home = generated_home(0, seed=29, big_session_rows=args.rows)
    temporary = Path(tempfile.mkdtemp(prefix="cold-", dir=OUT)) if args.cold else None
    try:
        if temporary is not None:
            home = fresh_copy(home, temporary)
        session_id, ledger = big_session(home)
        runs(home, session_id, ledger, args, temporary or OUT)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary)


def runs(home: Path, session_id: str, ledger: Path, args, caches_in: Path) -> None:
    size = ledger.stat().st_size / 2**20
    for run in range(1, args.runs + 1):
        rows = one_run(home, session_id, ledger, args, run, caches_in)
        print_table(
            f"Run {run}: one ledger of {args.rows:,} rows ({size:,.0f} MiB), operator and viewer "
            f"vs plain datasette serve of the same file, {args.requests} requests each, "
            f"interleaved{', first views cold' if args.cold else ''}",
            [
                "page",
                "capsem median / p90 ms",
                "plain median / p90 ms",
                "ratio",
                "capsem max ms",
                "server CPU ms/request, capsem / plain (or: background run)",
            ],
            rows,
        )


if __name__ == "__main__":
    main()
