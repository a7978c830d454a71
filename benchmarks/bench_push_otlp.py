"""push-otlp throughput on a generated 10,000-session home, against the sqlite3 command line.

`datasette capsem push-otlp` runs as a subprocess against an OTLP/HTTP sink in this process
(http.server on loopback, which decodes each protobuf request with opentelemetry-proto and
counts its spans). Runs: a first push (everything is sent), a second (nothing is new: the
delivery record skips every file), and the first again in OTLP/JSON. Beside them, the sqlite3
command line reads the same rows (every row push-otlp turns into a span, all columns) from
every ledger in one script, output to /dev/null: the floor of reading the data at all.
Each run reports wall seconds and the CPU seconds of its process (the machine is shared: CPU
time is the steadier figure), spans per second of each.

With `--phoenix BIN` (arize-phoenix's `phoenix`, in a venv of its own), a smaller home
(`--phoenix-sessions`, default 100) is pushed into a fresh `phoenix serve` too, timed until
Phoenix's GraphQL count says every span is written: what a real trace store ingests, against
what push-otlp sends (`--only-phoenix` skips the rest).

Homes are generated once into benchmarks/out/ and reused. Usage:
    python benchmarks/bench_push_otlp.py [--sessions 10000] [--batch-spans 500]
        [--phoenix .venv-phoenix/bin/phoenix] [--phoenix-sessions 100]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
from common import free_port, generated_home, manifest, print_table
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROW_TABLES = (
    "model_calls",
    "tool_calls",
    "net_events",
    "dns_events",
    "fs_events",
    "exec_events",
    "audit_events",
    "substitution_events",
    "mcp_calls",
    "snapshot_events",
)


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


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def push(home: Path, cache: Path, url: str, *extra: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one push-otlp run."""
    cpu = children_cpu()
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
        ],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if result.returncode not in (0, 1):  # 1: the generator's deliberately broken ledgers
        raise RuntimeError(result.stderr[-2000:])
    return seconds, children_cpu() - cpu, result.stdout


def ledger_paths(home: Path) -> list[Path]:
    return [home / e["ledger"] for e in manifest(home)["sessions"] if e["ledger"]]


def sqlite3_read(home: Path) -> tuple[float, float, int]:
    """One sqlite3 script reading every span-bearing row of every ledger; (wall seconds, CPU
    seconds, rows)."""
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
        cpu = children_cpu()
        started = time.perf_counter()
        with open(script.name) as stdin:
            subprocess.run([cli, "-batch"], stdin=stdin, capture_output=True, check=False)
        seconds = time.perf_counter() - started
        cpu = children_cpu() - cpu
        with open(counter.name) as stdin:
            counted = subprocess.run(
                [cli, "-batch"], stdin=stdin, capture_output=True, text=True, check=False
            )
        rows = sum(int(x) for x in counted.stdout.split() if x.isdigit())
    finally:
        os.unlink(script.name)
        os.unlink(counter.name)
    return seconds, cpu, rows


def process_cpu(pid: int) -> float:
    """CPU seconds a running process has used so far (/proc/<pid>/stat utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sent_spans(out: str) -> int:
    return int(out.split("spans: ")[1].split(" sent")[0])


def phoenix_run(binary: str, home: Path, batch: tuple[str, str]) -> list:
    """Push `home` into a fresh Phoenix: rows for its start-up, the push, and the wait until
    Phoenix has written every span."""
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        env = {
            **os.environ,
            "PHOENIX_WORKING_DIR": folder,
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        base = f"http://127.0.0.1:{port}"
        started = time.perf_counter()
        process = subprocess.Popen(
            [binary, "serve"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        try:
            while True:
                try:
                    if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.perf_counter() - started > 300:
                    raise RuntimeError("phoenix did not start")
                time.sleep(0.25)
            start_up = time.perf_counter() - started
            start_cpu = process_cpu(process.pid)
            began = time.perf_counter()
            seconds, cpu, out = push(home, Path(folder) / "cache", base + "/v1/traces", *batch)
            spans = sent_spans(out)
            while phoenix_count(base) < spans:
                if time.perf_counter() - began > 1800:
                    raise RuntimeError(f"Phoenix wrote {phoenix_count(base)} of {spans} spans")
                time.sleep(0.5)
            stored = time.perf_counter() - began
            ingest_cpu = process_cpu(process.pid) - start_cpu
        finally:
            process.terminate()
            process.wait(60)
    return [
        ["Phoenix start-up", f"{start_up:.1f}", f"{start_cpu:.1f}", "-", "-"],
        [
            "push-otlp into Phoenix",
            f"{seconds:.1f}",
            f"{cpu:.1f}",
            spans,
            f"{spans / seconds:,.0f}",
        ],
        [
            "push start until Phoenix has written every span (CPU: Phoenix's)",
            f"{stored:.1f}",
            f"{ingest_cpu:.1f}",
            spans,
            f"{spans / stored:,.0f}",
        ],
    ]


def phoenix_count(base: str) -> int:
    """Spans Phoenix has written, by its GraphQL count (listing them would slow it down)."""
    query = "{ projects { edges { node { recordCount } } } }"
    answer = httpx.post(f"{base}/graphql", json={"query": query}, timeout=60).json()
    return sum(e["node"]["recordCount"] for e in answer["data"]["projects"]["edges"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--batch-spans", type=int, default=500)
    parser.add_argument("--phoenix", help="arize-phoenix's `phoenix` executable")
    parser.add_argument("--phoenix-sessions", type=int, default=100)
    parser.add_argument("--only-phoenix", action="store_true", help="skip the sink and sqlite3")
    args = parser.parse_args()
    batch = ("--batch-spans", str(args.batch_spans))
    if not args.only_phoenix:
        sink_and_sqlite3(args, batch)
    if args.phoenix:
        small = generated_home(args.phoenix_sessions)
        print_table(
            f"push-otlp into Arize Phoenix, {args.phoenix_sessions:,}-session home",
            ["run", "wall s", "CPU s", "spans", "spans/s (wall)"],
            phoenix_run(args.phoenix, small, batch),
        )


def sink_and_sqlite3(args, batch: tuple[str, str]) -> None:
    home = generated_home(args.sessions)
    ledgers = len(ledger_paths(home))
    sink = Sink()
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        cache = Path(cache)
        first, first_cpu, _ = push(home, cache / "pb", sink.url, *batch)
        spans = sink.spans
        rows.append(run_row("push-otlp, first run (protobuf)", first, first_cpu, spans))
        second, second_cpu, out = push(home, cache / "pb", sink.url, *batch)
        rows.append(
            ["push-otlp, re-run (nothing new)", f"{second:.1f}", f"{second_cpu:.1f}", 0, "-"]
        )
        assert sink.spans == spans, "a re-run sent spans"
        before = sink.spans
        as_json, json_cpu, _ = push(home, cache / "json", sink.url, "--json", *batch)
        rows.append(
            run_row("push-otlp, first run (OTLP/JSON)", as_json, json_cpu, sink.spans - before)
        )
    read, read_cpu, read_rows = sqlite3_read(home)
    rows.append(run_row("sqlite3 CLI reads the same rows", read, read_cpu, read_rows))
    print_table(
        f"push-otlp on {args.sessions:,} sessions ({ledgers:,} ledgers), {os.cpu_count()} CPUs",
        ["run", "wall s", "CPU s", "spans (rows)", "spans/s (wall)"],
        rows,
    )
    print(
        f"\nratio push-otlp first run / sqlite3 read: {first / read:.1f}x wall, "
        f"{first_cpu / read_cpu:.1f}x CPU; push-otlp: {spans / first_cpu:,.0f} spans per CPU s"
    )
    print(out.strip())


def run_row(name: str, wall: float, cpu: float, spans: int) -> list:
    return [name, f"{wall:.1f}", f"{cpu:.1f}", spans, f"{spans / wall:,.0f}"]


if __name__ == "__main__":
    main()
