"""Integrity checks at scale: one 1,000,000-row session, and `check --all` on 1,000 sessions.

Case 1 runs the check engine on the biggest ledger of a generated home and, beside it, the
sqlite3 command line running the same SQL: every statement the engine sent, captured with
SQLite's trace callback (bound values expanded), in one script. The blake3 body-hash check
needs a Python function the CLI lacks, so the comparison leaves it out and reports it apart.
Target: the engine within 2x of the CLI.

Case 2 runs `datasette capsem check --all --json` as a subprocess on a home of 1,000 bulk
sessions (the generator writes a ledger for 3 in 10, main.db rows for the rest).

Homes are generated once into benchmarks/out/ and reused. Usage:
    python benchmarks/bench_check.py [--rows 1000000] [--sessions 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OUT, generated_home, manifest, print_table

from datasette_capsem import readonly
from datasette_capsem.checks import all_checks, check_session

HASH_CHECK = "blob_hash_mismatch"


def sqlite3_cli() -> str:
    """Debian's sqlite3 shell; install it with apt-get if it is missing."""
    found = shutil.which("sqlite3")
    if found:
        return found
    subprocess.run(["apt-get", "install", "-y", "-q", "sqlite3"], check=True)
    return shutil.which("sqlite3") or sys.exit("sqlite3 CLI unavailable")


def biggest_ledger(home: Path) -> tuple[dict, Path]:
    sessions = [s for s in manifest(home)["sessions"] if s["ledger"] and not s["alias_of"]]
    big = max(sessions, key=lambda s: sum(s["counts"].values()))
    return big, home / big["ledger"]


def timed_checks(path: Path, cache: Path, checks, repeat: int) -> tuple[float, list[str], object]:
    """Median wall seconds of check_session over `repeat` runs; statements of the first run."""
    times, statements, report = [], [], None
    for attempt in range(repeat):
        conn = readonly.open_readonly(path, cache)
        try:
            if attempt == 0:
                conn.set_trace_callback(statements.append)
            started = time.perf_counter()
            report = check_session(conn, checks=checks)
            times.append(time.perf_counter() - started)
        finally:
            conn.close()
    return statistics.median(times), statements, report


def cli_seconds(cli: str, path: Path, statements: list[str], repeat: int) -> float:
    """Median wall seconds of the sqlite3 shell running `statements` on the same file, read
    the same way the engine reads a finished ledger (immutable, so nothing is written)."""
    script = ";\n".join(s.rstrip().rstrip(";") for s in statements) + ";\n"
    uri = f"file:{path}?immutable=1"
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([cli, uri], input=script.encode(), stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def per_check_seconds(path: Path, cache: Path) -> list[tuple[str, float]]:
    """Seconds per check, less the fixed cost of a report (schema and row counts)."""
    conn = readonly.open_readonly(path, cache)
    try:
        started = time.perf_counter()
        check_session(conn, checks=[])
        baseline = time.perf_counter() - started
        found = [("(schema and row counts, every report)", baseline)]
        for check in all_checks():
            started = time.perf_counter()
            check_session(conn, checks=[check])
            found.append((check.id, time.perf_counter() - started - baseline))
    finally:
        conn.close()
    return sorted(found, key=lambda item: -item[1])


def big_session_case(rows: int, repeat: int, cache: Path) -> None:
    home = generated_home(
        0, seed=13, big_session_rows=rows, defects=False, hostile=False, broken=False
    )
    session, path = biggest_ledger(home)
    total_rows = sum(session["counts"].values())
    everything = all_checks()
    comparable = [c for c in everything if c.id != HASH_CHECK]
    engine_all, _, report = timed_checks(path, cache, everything, repeat)
    engine_sql, statements, _ = timed_checks(path, cache, comparable, repeat)
    shell = cli_seconds(sqlite3_cli(), path, statements, repeat)
    ratio = engine_sql / shell
    print_table(
        f"check on one session of {total_rows:,} rows ({path.stat().st_size / 2**20:,.0f} MiB, "
        f"{os.cpu_count()} cores, median of {repeat})",
        ["what", "statements", "wall time", "vs sqlite3 CLI", "target"],
        [
            ["sqlite3 CLI, same SQL", len(statements), f"{shell:.2f} s", "1.00x", ""],
            ["check engine, same checks", len(statements), f"{engine_sql:.2f} s",
             f"{ratio:.2f}x", "within 2x: " + ("yes" if ratio <= 2 else "NO")],
            ["check engine, every check", "", f"{engine_all:.2f} s", "", ""],
        ],
    )  # fmt: skip
    print(f"verdict {report.verdict}; problems: {[f.kind for f in report.problems]}")
    slowest = per_check_seconds(path, cache)[:8]
    print_table(
        "slowest checks on that session",
        ["check", "seconds"],
        [[name, f"{seconds:.3f}"] for name, seconds in slowest],
    )


def check_all_case(sessions: int, cache: Path) -> None:
    home = generated_home(sessions, seed=11)
    data = manifest(home)
    ledgers = sum(1 for s in data["sessions"] if s["ledger"] and not s["alias_of"])
    rows = []
    for workers in (1, 2):
        command = [
            sys.executable, "-m", "datasette", "capsem", "check", "--all", "--json",
            "--home", str(home), "--cache-dir", str(cache / f"all-{workers}"),
            "--workers", str(workers),
        ]  # fmt: skip
        started = time.perf_counter()
        result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - started
        rows.append([
            len(data["sessions"]), ledgers, workers, f"{seconds:.2f} s",
            f"{seconds * 1000 / len(data['sessions']):.1f} ms", result.returncode,
        ])  # fmt: skip
    print_table(
        f"datasette capsem check --all --json ({sessions:,} bulk sessions + the curated set)",
        ["sessions", "ledgers", "workers", "wall time", "per session", "exit"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="bench-check-cache-"))
    try:
        big_session_case(args.rows, args.repeat, cache)
        check_all_case(args.sessions, cache)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
