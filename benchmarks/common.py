"""Shared benchmark plumbing: generated homes, servers on loopback, timing, tables."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"


def generated_home(sessions: int, seed: int = 11, **options) -> Path:
    """A generated Capsem home under benchmarks/out/, reused across runs."""
    from datasette_capsem.generate import GenerateOptions, generate_home

    suffix = "-".join(f"{k}{v}" for k, v in sorted(options.items()))
    home = OUT / f"home-{sessions}-{seed}{'-' + suffix if suffix else ''}"
    if not (home / "manifest.json").exists():
        started = time.perf_counter()
        print(f"generating {sessions} sessions into {home} ...", file=sys.stderr)
        generate_home(home, GenerateOptions(seed=seed, sessions=sessions, force=True, **options))
        print(f"  done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return home


def manifest(home: Path) -> dict:
    return json.loads((home / "manifest.json").read_text())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def server(*args: str):
    """A benchmark server process on loopback; yields (base_url, pid, start_seconds)."""
    port = free_port()
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, str(HERE / "_server.py"), "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if httpx.get(base + "/-/versions.json", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or process.poll() is not None:
                raise RuntimeError(f"server {args} did not start")
            time.sleep(0.02)
        yield base, process.pid, time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(timeout=10)


def wait_for_index(client: httpx.Client, seconds: float = 600) -> float:
    """Wait until the server's background cross-session index build is done (the steady
    state of a running instance); returns how long that took."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        state = client.get("/-/capsem/index.json").json()
        if state.get("ready") and not state.get("refreshing") and state.get("ledgers_indexed"):
            break
        time.sleep(0.5)
    return time.perf_counter() - started


def wait_until_idle(
    pid: int, seconds: float = 60, window: float = 0.5, busy: float = 0.05
) -> float:
    """Wait until the server's threads use under `busy` of a core over `window` seconds: the
    index's "ready" comes before the work done after a refresh (the session list rebuilt,
    memory released: ~0.7 s of CPU at 10,000 sessions), which would otherwise be charged to
    the first row measured. Returns how long that took."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < busy * window:
            break
    return time.perf_counter() - started


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process (all its threads) has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The threads that serve requests, by their OS names: the event loop (the main thread),
# Datasette's SQL threads and the executors' (`run_in_executor`, `asyncio.to_thread`).
REQUEST_THREADS = ("ThreadPoolExecu", "asyncio_")


def request_cpu_seconds(pid: int) -> dict[int, float]:
    """User + system CPU time of each thread of a process that serves requests, by thread
    id: the main thread (the event loop) and the threads named as in REQUEST_THREADS.
    Anything else is background work a request does not wait for: the plugin's own threads
    (`capsem-index-refresh`, `capsem-list-build`, `capsem-catalog-scan`, ...) and the
    threads of the refresh's worker pool (the workers are other processes, never counted).
    `_server.py` gives each thread its Python name as the OS's (/proc/PID/task/TID/comm).
    Subtract two of these with `cpu_between`."""
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = Path(f"/proc/{pid}/task/{task}/comm").read_text().strip()
            fields = Path(f"/proc/{pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        if int(task) == pid or comm.startswith(REQUEST_THREADS):
            found[int(task)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def cpu_between(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the threads of `after` used since `before` (a thread new since: all of its
    own; one that ended meanwhile is not in `after`, and its last part is lost: a request's
    threads live as long as their pool, which the pages measured do not end)."""
    return sum(seconds - before.get(tid, 0.0) for tid, seconds in after.items())


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def median_ms(client: httpx.Client, urls: list[str], repeat: int = 1) -> float:
    timings = []
    for _ in range(repeat):
        for url in urls:
            started = time.perf_counter()
            response = client.get(url)
            timings.append((time.perf_counter() - started) * 1000)
            if response.status_code >= 500:
                raise RuntimeError(f"{url}: {response.status_code}")
    return statistics.median(timings)


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=False)]
    print(f"\n{title}")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)) + " |")
