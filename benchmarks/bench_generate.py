"""Generator throughput: 10,000 small sessions, and one session of 1,000,000 rows.

Each case runs in a fresh temporary directory (deleted afterwards) and prints wall time, rows,
files and bytes written. Targets: each case under 2 minutes on a 2-core machine. Usage:
    python benchmarks/bench_generate.py [--sessions 10000] [--rows 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

from common import print_table

from datasette_capsem.generate import GenerateOptions, generate_home


def disk_usage(home: Path) -> tuple[int, int]:
    files = [p for p in home.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def run_case(label: str, options: GenerateOptions, root: Path) -> list:
    home = root / label.replace(" ", "-")
    started = time.perf_counter()
    manifest = generate_home(home, options)
    seconds = time.perf_counter() - started
    ledgers = [s for s in manifest["sessions"] if s["ledger"] and not s["alias_of"]]
    rows = sum(sum(s["counts"].values()) for s in ledgers)
    files, size = disk_usage(home)
    return [
        label,
        len(manifest["sessions"]),
        len(ledgers),
        f"{rows:,}",
        files,
        f"{size / 2**20:,.0f} MiB",
        f"{seconds:.1f} s",
        f"{rows / seconds:,.0f}",
        "yes" if seconds < 120 else "NO",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="write the homes here and keep them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-generate-"))
    try:
        cases = [
            (f"{args.sessions:,} sessions", GenerateOptions(seed=3, sessions=args.sessions)),
            (
                f"1 session of {args.rows:,} rows",
                GenerateOptions(
                    seed=3, big_session_rows=args.rows, defects=False, hostile=False, broken=False
                ),
            ),
        ]
        rows = [run_case(label, options, root) for label, options in cases]
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print_table(
        f"datasette capsem generate ({os.cpu_count()} cores, peak RSS {peak:,.0f} MiB)",
        [
            "case",
            "sessions",
            "ledgers",
            "ledger rows",
            "files",
            "on disk",
            "wall time",
            "rows/s",
            "< 2 min",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
