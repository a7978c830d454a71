"""Integrity checks at scale: one 1,000,000-row session, and `check --all` on 1,000 sessions.

Case 1 runs the check engine on the biggest ledger of a generated home as `datasette capsem
check` runs it (the checks that read the whole file on a second connection, meanwhile) and,
beside it, the sqlite3 command line running the same SQL: every statement both connections
sent, captured with SQLite's trace callback (bound values expanded), in one script. The blake3 body-hash check
needs a Python function the CLI lacks, so the comparison leaves it out and reports it apart.
Case 2 runs `datasette capsem check --all --json` as a subprocess on a home of 1,000 bulk
sessions (the generator writes a ledger for 3 in 10, main.db rows for the rest) and, beside
it, one sqlite3 command line opening every ledger in turn (`.open`, read the way the engine
reads it) and running the statements the engine sent to it, captured the same way; the blake3
statements stay out of the CLI's script (it lacks the function) but in the engine's run.
`check --all` runs with one and with two worker processes (`--workers`; the CLI is one
process, so two workers use the second core it leaves idle). Target: `check` within 1.0x of
the CLI, `check --all` within 1.5x. Runs are interleaved (engine, CLI, engine, CLI, ...) so
both sides see the same load; ratios are of medians; CPU seconds of each side are printed too.

Homes are generated once into benchmarks/out/ and reused. Usage:
    python benchmarks/bench_check.py [--rows 1000000] [--sessions 1000] [--repeat 3]
        [--skip-big | --big-only]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import OUT, generated_home, manifest, print_table

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog
from datasette_capsem.checks import all_checks, check_session
from datasette_capsem.config import load_settings

HASH_CHECK = "blob_hash_mismatch"
HASH_FUNCTION = "capsem_body_hash_verdict"


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


def timed_checks(path: Path, cache: Path, checks, trace=None) -> tuple[float, object]:
    """Wall seconds of one check_session as `datasette capsem check` runs it (the checks that
    read the whole file on a second connection, meanwhile); `trace` receives every statement
    both connections send (the shell then runs them one after the other, as it can only)."""

    def opened():
        conn = readonly.open_readonly(path, cache)
        if trace is not None:
            conn.set_trace_callback(trace)
        return conn

    conn = opened()
    try:
        started = time.perf_counter()
        report = check_session(conn, checks=checks, reopen=opened)
        return time.perf_counter() - started, report
    finally:
        conn.close()


def cli_script(statements: list[str]) -> str:
    return ";\n".join(s.rstrip().rstrip(";") for s in statements) + ";\n"


def children_cpu() -> float:
    """CPU seconds used so far by this process's finished children (user + system): on a
    machine other jobs load, the steadier figure beside the wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_run(cli: str, args: list[str], script: str) -> float:
    """Wall seconds of the sqlite3 shell running `script`."""
    started = time.perf_counter()
    subprocess.run([cli, *args], input=script.encode(), stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def ratio_row(label: str, statements, engine: list[float], shell: list[float], goal: float):
    ratio = statistics.median(engine) / statistics.median(shell)
    same_run = ", ".join(f"{e / c:.2f}" for e, c in zip(engine, shell, strict=True))
    return [
        label,
        statements,
        f"{statistics.median(engine):.2f} s",
        f"{ratio:.2f}x",
        same_run,
        f"<= {goal}x: " + ("yes" if ratio <= goal else "NO"),
    ]


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


def big_session_case(rows: int, repeat: int, cache: Path, cli: str) -> None:
    home = generated_home(
        0, seed=13, big_session_rows=rows, defects=False, hostile=False, broken=False
    )
    session, path = biggest_ledger(home)
    total_rows = sum(session["counts"].values())
    everything = all_checks()
    comparable = [c for c in everything if c.id != HASH_CHECK]
    statements: list[str] = []
    timed_checks(path, cache, comparable, statements.append)  # warms the page cache too
    script, uri = cli_script(statements), f"file:{path}?immutable=1"
    engine, shell, engine_all = [], [], []
    for _ in range(repeat):
        engine.append(timed_checks(path, cache, comparable)[0])
        shell.append(cli_run(cli, [uri], script))
    for _ in range(repeat):
        seconds, report = timed_checks(path, cache, everything)
        engine_all.append(seconds)
    print_table(
        f"check on one session of {total_rows:,} rows ({path.stat().st_size / 2**20:,.0f} MiB, "
        f"{os.cpu_count()} cores, interleaved, median of {repeat}; load {load()})",
        ["what", "statements", "wall time", "vs sqlite3 CLI", "each run", "goal"],
        [
            [
                "sqlite3 CLI, same SQL",
                len(statements),
                f"{statistics.median(shell):.2f} s",
                "1.00x",
                "",
                "",
            ],
            ratio_row("check engine, same checks", len(statements), engine, shell, 1.0),
            ["check engine, every check", "", f"{statistics.median(engine_all):.2f} s", "", "", ""],
        ],
    )
    print(f"verdict {report.verdict}; problems: {[f.kind for f in report.problems]}")
    slowest = per_check_seconds(path, cache)[:8]
    print_table(
        "slowest checks on that session",
        ["check", "seconds"],
        [[name, f"{seconds:.3f}"] for name, seconds in slowest],
    )


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def check_all_script(home: Path, cache: Path) -> tuple[str, int]:
    """One sqlite3 shell script: for every ledger `check --all` reads, `.open` it the way the
    engine does and run the statements the engine sent (less the blake3 ones)."""
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache)})
    parts, count = [], 0
    for session in Catalog(settings).sessions():
        if session.ledger_path is None:
            continue
        statements: list[str] = []
        try:
            state = readonly.inspect_file(session.ledger_path)
            conn = readonly.connect(state, cache)
        except readonly.LedgerUnavailable:
            continue  # the engine reports it unreadable without running a statement
        try:
            conn.set_trace_callback(statements.append)
            check_session(conn, session=session, live=session.live)
        finally:
            conn.close()
        kept = [s for s in statements if HASH_FUNCTION not in s]
        uri = readonly.sqlite_uri(state, cache).replace("'", "''")
        parts.append(f".open '{uri}'\n" + cli_script(kept))
        count += len(kept)
    return "".join(parts), count


def check_all_case(sessions: int, repeat: int, cache: Path, cli: str) -> None:
    home = generated_home(sessions, seed=11)
    data = manifest(home)
    ledgers = sum(1 for s in data["sessions"] if s["ledger"] and not s["alias_of"])
    script, statements = check_all_script(home, cache / "all")
    rows, cpu_rows = [], []
    for workers in (1, 2):
        command = [
            sys.executable,
            "-m",
            "datasette",
            "capsem",
            "check",
            "--all",
            "--json",
            "--home",
            str(home),
            "--cache-dir",
            str(cache / "all"),
            "--workers",
            str(workers),
        ]
        engine, shell, engine_cpu, shell_cpu = [], [], [], []
        for _ in range(repeat):
            before, started = children_cpu(), time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            engine.append(time.perf_counter() - started)
            engine_cpu.append(children_cpu() - before)
            before = children_cpu()
            shell.append(cli_run(cli, [":memory:"], script))
            shell_cpu.append(children_cpu() - before)
        if workers == 1:
            rows.append(
                [
                    "sqlite3 CLI, same SQL",
                    statements,
                    f"{statistics.median(shell):.2f} s",
                    "1.00x",
                    "",
                    "",
                ]
            )
        rows.append(ratio_row(f"check --all, {workers} process(es)", "", engine, shell, 1.5))
        cpu_rows.append(
            [
                f"{workers} process(es)",
                f"{statistics.median(engine_cpu):.1f} s",
                f"{statistics.median(shell_cpu):.1f} s",
            ]
        )
    print_table(
        f"datasette capsem check --all --json: {len(data['sessions']):,} sessions, {ledgers} "
        f"ledgers (interleaved, median of {repeat}; load {load()})",
        ["what", "statements", "wall time", "vs sqlite3 CLI", "each run", "goal"],
        rows,
    )
    print_table(
        "CPU seconds (user + system), medians", ["check --all", "engine", "sqlite3 CLI"], cpu_rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-big", action="store_true", help="only the check --all case")
    parser.add_argument("--big-only", action="store_true", help="only the one-session case")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    cache = Path(tempfile.mkdtemp(prefix="bench-check-cache-"))
    cli = sqlite3_cli()
    try:
        if not args.skip_big:
            big_session_case(args.rows, args.repeat, cache, cli)
        if not args.big_only:
            check_all_case(args.sessions, args.repeat, cache, cli)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
