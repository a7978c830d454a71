"""Run a captured build script (`bench_build.captured_file`) through Python's sqlite3 module:
one connection per `.open`, every statement executed and its rows fetched, nothing else.

What the statements alone cost from Python, beside the sqlite3 shell replaying the same script
(`bench_build.py --python-replay`): the floor under the build's own Python. Prints the CPU and
wall seconds of running the statements, not of reading the script and splitting it into
statements. The script is read a ledger at a time, never held whole: a process that held the
whole script ran its statements up to ~1.5x slower in some runs on this machine, for a reason
not pinned down.

Usage: python benchmarks/_python_replay.py SCRIPT.build.sql   (prints "CPU-s wall-s refused")
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Iterator

OPEN = ".open "


def ledgers(path: str) -> Iterator[tuple[str, list[str]]]:
    """(URI, statements) of each `.open` of the script, in order. A statement ends on a line
    ending in `;` where SQLite says it is complete (a `;` inside a string does not end it);
    the URI is unquoted as `bench_sessions.build_script` quoted it (`'` doubled)."""
    current: tuple[str, list[str]] | None = None
    lines: list[str] = []
    with open(path, encoding="utf-8") as script:
        for line in script:
            if line.startswith(OPEN):
                if current is not None:
                    yield current
                quoted = line[len(OPEN) :].strip()
                current, lines = (quoted[1:-1].replace("''", "'"), []), []
                continue
            if current is None:
                continue
            lines.append(line)
            if line.rstrip().endswith(";") and sqlite3.complete_statement(text := "".join(lines)):
                current[1].append(text)
                lines = []
    if current is not None:
        yield current


def replay(path: str) -> tuple[float, float, int]:
    """Run every statement of the script: (CPU s, wall s) of running them, and how many SQLite
    refused (the shell prints their errors and goes on, as this does)."""
    refused, cpu, wall = 0, 0.0, 0.0
    for uri, statements in ledgers(path):
        began, began_cpu = time.perf_counter(), time.process_time()
        conn = sqlite3.connect(uri, uri=True)
        try:
            for statement in statements:
                try:
                    conn.execute(statement).fetchall()
                except sqlite3.Error:
                    refused += 1
        finally:
            conn.close()
        cpu += time.process_time() - began_cpu
        wall += time.perf_counter() - began
    return cpu, wall, refused


if __name__ == "__main__":
    print(*replay(sys.argv[1]))
