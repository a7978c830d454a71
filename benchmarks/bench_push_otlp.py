"""push-otlp throughput on a generated 10,000-session home, against the sqlite3 command line.

`datasette capsem push-otlp` runs as a subprocess against an OTLP/HTTP sink in this process
(http.server on loopback, which decodes each protobuf request with opentelemetry-proto and
counts its spans). Runs: a first push (everything is sent), a second (nothing is new: the
delivery record skips every file), and the first again in OTLP/JSON. Beside them, the sqlite3
command line reads the same rows (every row push-otlp turns into a span, all columns) from
every ledger in one script, output to /dev/null: the floor of reading the data at all.

Homes are generated once into benchmarks/out/ and reused. Usage:
    python benchmarks/bench_push_otlp.py [--sessions 10000] [--batch-spans 500]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from common import generated_home, manifest, print_table
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROW_TABLES = (
    "model_calls", "tool_calls", "net_events", "dns_events", "fs_events", "exec_events",
    "audit_events", "substitution_events", "mcp_calls", "snapshot_events",
)  # fmt: skip


class Sink:
    """Counts the spans of every request it acknowledges."""

    def __init__(self) -> None:
        self.spans = 0
        self.requests = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if "protobuf" in self.headers.get("content-type", ""):
                    request = ExportTraceServiceRequest.FromString(body)
                    count = sum(
                        len(scope.spans)
                        for rs in request.resource_spans
                        for scope in rs.scope_spans
                    )
                else:
                    count = body.count(b'"spanId"')
                sink.spans += count
                sink.requests += 1
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"


def push(home: Path, cache: Path, url: str, *extra: str) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "datasette",
            "capsem",
            "push-otlp",
            "--home",
            str(home),
            "--cache-dir",
            str(cache),
            "--endpoint",
            url,
            *extra,
        ],  # fmt: skip
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if result.returncode not in (0, 1):  # 1: the generator's deliberately broken ledgers
        raise RuntimeError(result.stderr[-2000:])
    return seconds, result.stdout


def ledger_paths(home: Path) -> list[Path]:
    return [home / e["ledger"] for e in manifest(home)["sessions"] if e["ledger"]]


def sqlite3_read(home: Path) -> tuple[float, int]:
    """One sqlite3 script reading every span-bearing row of every ledger; (seconds, rows)."""
    cli = shutil.which("sqlite3")
    if cli is None:
        raise SystemExit("the sqlite3 command line is missing (apt-get install sqlite3)")
    lines = [".bail off", ".mode list", ".output /dev/null"]
    count_lines = [".bail off", ".mode list"]
    for path in ledger_paths(home):
        if path.suffix != ".db" or path.stat().st_size == 0:
            continue
        uri = f"file:{path}?immutable=1"
        lines.append(f".open --readonly '{uri}'")
        count_lines.append(f".open --readonly '{uri}'")
        for table in ROW_TABLES:
            lines.append(f"SELECT * FROM {table} WHERE trace_id IS NOT NULL;")
            count_lines.append(f"SELECT count(*) FROM {table} WHERE trace_id IS NOT NULL;")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write("\n".join(lines) + "\n")
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as counter:
        counter.write("\n".join(count_lines) + "\n")
    try:
        started = time.perf_counter()
        with open(script.name) as stdin:
            subprocess.run([cli, "-batch"], stdin=stdin, capture_output=True, check=False)
        seconds = time.perf_counter() - started
        with open(counter.name) as stdin:
            counted = subprocess.run(
                [cli, "-batch"], stdin=stdin, capture_output=True, text=True, check=False
            )
        rows = sum(int(x) for x in counted.stdout.split() if x.isdigit())
    finally:
        os.unlink(script.name)
        os.unlink(counter.name)
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--batch-spans", type=int, default=500)
    args = parser.parse_args()
    home = generated_home(args.sessions)
    ledgers = len(ledger_paths(home))
    sink = Sink()
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        cache = Path(cache)
        batch = ("--batch-spans", str(args.batch_spans))
        first, _ = push(home, cache / "pb", sink.url, *batch)
        spans = sink.spans
        rows.append(
            ["push-otlp, first run (protobuf)", f"{first:.1f}", spans, f"{spans / first:,.0f}"]
        )
        second, out = push(home, cache / "pb", sink.url, *batch)
        rows.append(["push-otlp, re-run (nothing new)", f"{second:.1f}", sink.spans - spans, "-"])
        before = sink.spans
        as_json, _ = push(home, cache / "json", sink.url, "--json", *batch)
        sent = sink.spans - before
        rows.append(
            ["push-otlp, first run (OTLP/JSON)", f"{as_json:.1f}", sent, f"{sent / as_json:,.0f}"]
        )
    read, read_rows = sqlite3_read(home)
    rows.append(
        ["sqlite3 CLI reads the same rows", f"{read:.1f}", read_rows, f"{read_rows / read:,.0f}"]
    )
    print_table(
        f"push-otlp on {args.sessions:,} sessions ({ledgers:,} ledgers), {os.cpu_count()} CPUs",
        ["run", "seconds", "spans (rows)", "per second"],
        rows,
    )
    print(f"\nratio push-otlp first run / sqlite3 read: {first / read:.1f}x")
    print(out.strip())


if __name__ == "__main__":
    main()
