"""`datasette capsem push-otlp` against a real OTLP/HTTP receiver (tests/otlp_receiver.py):
what arrives matches the ledgers (independent SQL), batches are bounded, a re-run sends
nothing, a receiver failing mid-stream loses and duplicates nothing, --follow picks up a new
session and new rows, credentials are masked unless --unmasked, bad input gets a clear answer.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.generate import GenerateOptions, generate_home
from datasette_capsem.generate.live import LiveWriter
from datasette_capsem.graph.otlp import export_trace, merge
from datasette_capsem.graph.trace_rows import load_trace
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.push.encode import to_protobuf
from datasette_capsem.readonly import LedgerUnavailable, open_readonly
from tests.helpers import session_in, sessions_in
from tests.otlp_receiver import Receiver

ROOT = Path(__file__).resolve().parent.parent
HOST_TABLES = (
    "net_events",
    "dns_events",
    "fs_events",
    "exec_events",
    "audit_events",
    "substitution_events",
    "mcp_calls",
    "snapshot_events",
)

ROOT_NAMES = ("capsem.turn", "capsem.exchange", "capsem.ambient")
SECRET = "sk-ant-api03-" + "Q7" * 20 + "-plantedAA"
HANG_GUARD = 120  # seconds: only to bound a hang, never a performance threshold


def clean_options(seed: int = 5) -> GenerateOptions:
    return GenerateOptions(seed=seed, defects=False, hostile=False, broken=False, force=True)


@pytest.fixture(scope="module")
def clean_home(tmp_path_factory) -> tuple[Path, dict]:
    """A generated home without injected defects or broken files (exact counts)."""
    path = tmp_path_factory.mktemp("push-home") / "home"
    return path, generate_home(path, clean_options())


def push(home: Path, cache: Path, *args: str) -> tuple[int, str, str]:
    """Run the command in-process; (exit code, stdout, stderr)."""
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["capsem", "push-otlp", "--home", str(home), "--cache-dir", str(cache), *args],
        catch_exceptions=False,
    )
    return result.exit_code, result.stdout, result.stderr


def tree_state(home: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every file, but a live ledger's -shm: SQLite's reader bookkeeping
    there is the one write any reader makes (readonly.py, spec §4.7)."""
    return {
        str(p.relative_to(home)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(home.rglob("*"))
        if p.is_file() and not p.name.endswith("-shm")
    }


def ledgers(home: Path, manifest: dict, cache: Path):
    """(session id, read-only connection) of every readable ledger."""
    for entry in sessions_in(manifest, has=("ledger",)):
        try:
            conn = open_readonly(home / entry["ledger"], cache)
        except LedgerUnavailable:
            continue
        conn.row_factory = sqlite3.Row
        yield entry["id"], conn


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute("SELECT * FROM pragma_table_info(?)", [table])}


def expected_rows(home: Path, manifest: dict, cache: Path) -> set[tuple[str, str, int]]:
    """(Capsem trace id, table, row id) of every row push-otlp should send as a span, by SQL
    over the ledgers: model calls, tool calls a model call emitted or that carry a UUID trace,
    and host rows, each with a trace id. Forks repeat their parent's rows: a set."""
    found = set()
    for _sid, conn in ledgers(home, manifest, cache):
        with conn:
            if "trace_id" not in columns(conn, "model_calls"):
                continue
            for row in conn.execute(
                "SELECT trace_id, id FROM model_calls WHERE trace_id IS NOT NULL"
            ):
                found.add((row["trace_id"], "model_calls", row["id"]))
            own = "t.trace_id" if "trace_id" in columns(conn, "tool_calls") else "NULL"
            for row in conn.execute(  # own: one of two constants
                f"SELECT coalesce(m.trace_id, {own}) AS trace_id, t.id FROM tool_calls AS t "
                "LEFT JOIN model_calls AS m ON m.id = t.model_call_id "
                f"WHERE m.trace_id IS NOT NULL OR ({own} IS NOT NULL AND "
                f"NOT (length({own}) = 16 AND {own} NOT GLOB '*[^0-9a-f]*'))"
            ):
                found.add((row["trace_id"], "tool_calls", row["id"]))
            for table in HOST_TABLES:
                if "trace_id" not in columns(conn, table):
                    continue
                sql = f"SELECT trace_id, id FROM {table} WHERE trace_id IS NOT NULL"  # constant
                for row in conn.execute(sql):
                    found.add((row["trace_id"], table, row["id"]))
    return found


def received_rows(receiver: Receiver) -> set[tuple[str, str, int]]:
    # One copy of the spans received so far: the receiver's thread appends meanwhile, and a
    # child read after the roots were gathered may belong to a root that came in between.
    spans = list(receiver.spans)
    roots = {s.trace_id: s.attributes["capsem.trace_id"] for s in spans if s.name in ROOT_NAMES}
    return {
        (roots[s.trace_id], s.attributes["capsem.table"], s.attributes["capsem.row_id"])
        for s in spans
        if s.name not in ROOT_NAMES
    }


def assert_no_duplicates(receiver: Receiver) -> None:
    keys = Counter((s.trace_id, s.span_id) for s in receiver.spans)
    assert [k for k, n in keys.items() if n > 1] == []


def assert_span_ids_unique(receiver: Receiver) -> None:
    """No span id in two traces: stores such as Phoenix key spans by span id alone
    (`UNIQUE (span_id)`) and silently drop a repeat, as they did when ids were per row."""
    traces_of = defaultdict(set)
    for span in receiver.spans:
        traces_of[span.span_id].add(span.trace_id)
    assert {s: t for s, t in traces_of.items() if len(t) > 1} == {}


def assert_linked(receiver: Receiver) -> None:
    """One root per trace, every parent present in its trace: no orphans."""
    by_trace = defaultdict(dict)
    for span in receiver.spans:
        by_trace[span.trace_id][span.span_id] = span
    for trace, spans in by_trace.items():
        roots = [s for s in spans.values() if not s.parent_span_id]
        assert len(roots) == 1 and roots[0].name in ROOT_NAMES, trace
        assert all(s.parent_span_id in spans for s in spans.values() if s.parent_span_id)


def token_totals(home: Path, manifest: dict, cache: Path) -> dict[str, tuple[int, int]]:
    totals = {}
    for _sid, conn in ledgers(home, manifest, cache):
        with conn:
            for row in conn.execute(
                "SELECT trace_id, sum(input_tokens), sum(output_tokens) FROM model_calls "
                "WHERE trace_id IS NOT NULL GROUP BY trace_id"
            ):
                totals[row[0]] = (row[1] or 0, row[2] or 0)
    return totals


def received_token_totals(receiver: Receiver) -> dict[str, tuple[int, int]]:
    """Per Capsem trace: the sum over its roots (one per ambient exchange)."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for span in receiver.spans:
        if span.name in ("capsem.turn", "capsem.exchange"):
            entry = totals[span.attributes["capsem.trace_id"]]
            entry[0] += span.attributes["gen_ai.usage.input_tokens"]
            entry[1] += span.attributes["gen_ai.usage.output_tokens"]
    return {trace: tuple(v) for trace, v in totals.items()}


def test_push_matches_the_ledgers_in_bounded_batches_and_resumes(clean_home, tmp_path):
    home, manifest = clean_home
    cache = tmp_path / "cache"
    before = tree_state(home)
    with Receiver() as receiver:
        code, out, err = push(
            home, cache, "--endpoint", receiver.url, "--batch-spans", "50", "--home-label", "lab-1"
        )
        assert code == 0, out + err
        assert "Traceback" not in err
        assert all(0 < r["spans"] <= 50 for r in receiver.requests)
        assert {r["content_type"] for r in receiver.requests} == {"application/x-protobuf"}
        assert_no_duplicates(receiver)
        assert_span_ids_unique(receiver)
        assert_linked(receiver)
        assert received_rows(receiver) == expected_rows(home, manifest, tmp_path / "read")
        assert received_token_totals(receiver) == token_totals(home, manifest, tmp_path / "read")
        assert {s.resource["capsem.home"] for s in receiver.spans} == {"lab-1"}
        assert {s.resource["service.name"] for s in receiver.spans} == {"capsem"}
        sent = len(receiver.spans)
        assert f"spans: {sent} sent in {len(receiver.requests)} requests" in out
        assert "0 failed" in out

        # Resume: a second run sends nothing and says so.
        code, out, err = push(home, cache, "--endpoint", receiver.url, "--home-label", "lab-1")
        assert code == 0, out + err
        assert len(receiver.spans) == sent
        assert "spans: 0 sent in 0 requests" in out
        assert "already delivered" in out
    assert tree_state(home) == before, "push-otlp never writes into the Capsem home"
    assert (cache).is_dir() and any(cache.rglob("push-otlp/*.sqlite"))


def test_a_first_push_says_nothing_was_already_delivered(clean_home, tmp_path):
    """A first push said "4 traces already delivered": spans shared by two sessions of the
    run (a fork's copied rows) are sent once and now counted as shared, not delivered."""
    home, _ = clean_home
    with Receiver() as receiver:
        code, out, err = push(home, tmp_path / "cache", "--endpoint", receiver.url)
        assert code == 0, out + err
        assert "0 already delivered" in out and ", 0 traces already delivered" in err
        assert not re.search(r"[1-9][0-9]* (traces )?already delivered", out + err), out + err
        sent = len(receiver.spans)
        code, out, _ = push(home, tmp_path / "cache", "--endpoint", receiver.url, "--summary-json")
        summary = json.loads(out)
        assert summary["spans"]["sent"] == 0 and len(receiver.spans) == sent
        assert summary["spans"]["skipped"] > 0  # a rerun: these were delivered


def test_home_label_defaults_to_the_folder_name_and_json_is_otlp_json(clean_home, tmp_path):
    home, _manifest = clean_home
    with Receiver() as receiver:
        code, out, err = push(home, tmp_path / "cache", "--endpoint", receiver.base_url, "--json")
        assert code == 0, out + err
        assert {r["content_type"] for r in receiver.requests} == {"application/json"}
        assert {s.resource["capsem.home"] for s in receiver.spans} == {home.name}
        json_rows = received_rows(receiver)
    with Receiver() as receiver:
        code, out, err = push(home, tmp_path / "cache", "--endpoint", receiver.base_url)
        assert code == 0, out + err
        assert received_rows(receiver) == json_rows


def test_a_receiver_failing_mid_stream_loses_and_duplicates_nothing(clean_home, tmp_path):
    home, manifest = clean_home
    expected = expected_rows(home, manifest, tmp_path / "read")
    with Receiver() as receiver:
        # Requests 3.. fail: three 503s, then a 429 asking for a (short) wait, then recovery.
        receiver.fail_after(2, 3, 503)
        receiver.fail_after(5, 1, 429, {"retry-after": "0"})
        code, out, err = push(
            home,
            tmp_path / "cache",
            *("--endpoint", receiver.url, "--batch-spans", "40", "--backoff", "0.01"),
        )
        assert code == 0, out + err
        assert [r["status"] for r in receiver.requests].count(503) == 3
        assert "HTTP 503" in err and "retrying" in err
        assert "(4 retries)" in out
        assert_no_duplicates(receiver)
        assert received_rows(receiver) == expected


def test_an_endpoint_down_past_the_retries_fails_then_a_rerun_completes(clean_home, tmp_path):
    home, manifest = clean_home
    expected = expected_rows(home, manifest, tmp_path / "read")
    cache = tmp_path / "cache"
    with Receiver() as receiver:
        receiver.fail_after(3, 50, 503)
        args = ("--endpoint", receiver.url, "--batch-spans", "40", "--backoff", "0.001")
        code, out, err = push(home, cache, *args, "--retries", "2")
        assert code == 1
        assert "Traceback" not in err
        assert "3 attempts failed; last: HTTP 503" in err
        assert "stopped: the endpoint is unreachable" in out
        delivered = len(receiver.spans)
        assert 0 < delivered < len(expected)
        receiver.clear_failures()  # the receiver is back
        code, out, err = push(home, cache, *args)
        assert code == 0, out + err
        assert_no_duplicates(receiver)
        assert received_rows(receiver) == expected


@pytest.mark.heavy  # tens of seconds: its module is scheduled first (conftest.py)
def test_follow_picks_up_a_new_session_and_new_rows(clean_home, tmp_path):
    source, manifest = clean_home
    home = tmp_path / "home"
    shutil.copytree(source, home, symlinks=True)
    other = tmp_path / "other"
    other_manifest = generate_home(other, clean_options(seed=9))
    newcomer = session_in(other_manifest, era="head", kind="ephemeral", has=("ledger", "traces"))
    live = session_in(manifest, era="head", kind="ephemeral", has=("ledger",), lacks=("live",))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Receiver() as receiver:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "datasette",
                "capsem",
                "push-otlp",
                "--endpoint",
                receiver.url,
                "--home",
                str(home),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--follow",
                "--interval",
                "0.3",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:

            def wait_for(condition) -> None:
                deadline = time.monotonic() + HANG_GUARD
                while not condition():
                    assert process.poll() is None, process.communicate()
                    assert time.monotonic() < deadline, "push-otlp --follow did not catch up"
                    time.sleep(0.1)

            sessions = lambda: {s.resource["capsem.session.id"] for s in receiver.spans}  # noqa: E731
            wait_for(lambda: live["id"] in sessions())
            # A new session appears (copied in, as a sync would).
            target = home / Path(newcomer["ledger"]).parent
            shutil.copytree(other / Path(newcomer["ledger"]).parent, target)
            wait_for(lambda: newcomer["id"] in sessions())
            # A session gets new rows (Capsem's writer, in WAL mode, from another process).
            before = len(receiver.spans)
            writer = LiveWriter(home, live["id"], rate=200, duration=1.0, seed=4).start()
            assert writer.process.wait(HANG_GUARD) == 0
            writer.stop()
            # Read once: the writer has stopped, so the ledgers no longer change (re-read at
            # each 0.1 s poll, they cost the wait seconds of CPU).
            expected = expected_rows(home, manifest, tmp_path / "r")
            wait_for(lambda: received_rows(receiver) >= expected)
            assert len(receiver.spans) > before
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=HANG_GUARD)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 0, out + err
        assert "Traceback" not in err
        assert "interrupted" in err and "spans:" in out
        # Changed traces were sent again only for spans that changed: no span twice unchanged.
        counts = Counter(
            (s.trace_id, s.span_id, s.end_ns, json.dumps(s.attributes, sort_keys=True))
            for s in receiver.spans
        )
        assert max(counts.values()) == 1
        newcomer_rows = expected_rows(other, {"sessions": [newcomer]}, tmp_path / "r2")
        assert newcomer_rows <= received_rows(receiver)


def plant_secret(home: Path, entry: dict) -> None:
    """Write a credential into a copied ledger's reply text and tool arguments."""
    conn = sqlite3.connect(home / entry["ledger"])
    try:
        conn.execute(
            "UPDATE model_calls SET text_content = ? WHERE id = (SELECT min(id) FROM model_calls)",
            [f"here is the key: {SECRET} keep it"],
        )
        conn.execute(
            "UPDATE tool_calls SET arguments = ? WHERE id = (SELECT min(id) FROM tool_calls)",
            [json.dumps({"cmd": f"curl -H 'x-api-key: {SECRET}' https://api.example"})],
        )
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def test_credentials_are_masked_unless_unmasked(clean_home, tmp_path):
    source, manifest = clean_home
    home = tmp_path / "home"
    shutil.copytree(source, home, symlinks=True)
    entry = session_in(
        manifest, era="head", has=("ledger",), where=lambda e: e["counts"].get("tool_calls")
    )
    plant_secret(home, entry)
    for unmasked, json_mode in ((False, False), (False, True), (True, False)):
        with Receiver() as receiver:
            flags = ["--unmasked"] * unmasked + ["--json"] * json_mode
            code, out, err = push(
                home, tmp_path / f"cache-{unmasked}-{json_mode}", "--endpoint", receiver.url, *flags
            )
            assert code == 0, out + err
            raw = b"".join(receiver.bodies)
            values = json.dumps([s.attributes for s in receiver.spans])
            if unmasked:
                assert SECRET in values
            else:
                assert SECRET.encode() not in raw and SECRET not in values
                assert SECRET[:20] not in values
                assert "[redacted:" in values


def test_default_home_unreadable_ledgers_are_named_and_fail_the_run(
    capsem_home, manifest, tmp_path
):
    with Receiver() as receiver:
        code, out, err = push(capsem_home, tmp_path / "cache", "--endpoint", receiver.url)
    assert code == 1, out + err
    assert "Traceback" not in err
    unreadable = {
        line.split(":")[1].strip() for line in out.splitlines() if line.startswith("unreadable:")
    }
    broken = {
        e["id"]
        for e in sessions_in(
            manifest, has=("broken",), where=lambda e: e["broken"] != "wal_without_shm"
        )
    }
    assert unreadable and unreadable <= broken
    assert "0 failed" in out
    assert_no_duplicates(receiver)
    assert_linked(receiver)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--endpoint", "not a url"], "--endpoint"),
        (["--endpoint", "ftp://example.com/v1/traces"], "not an http:// or https:// URL"),
        (["--endpoint", "http://127.0.0.1:99999/v1/traces"], "--endpoint"),
        (["--endpoint", "http:///v1/traces"], "names no host"),
        (["--endpoint", "http://127.0.0.1:4318", "--header", "authorization"], "NAME=VALUE"),
        (["--endpoint", "http://127.0.0.1:4318", "--header", "=x"], "NAME=VALUE"),
    ],
)
def test_bad_options_get_a_clear_answer(clean_home, tmp_path, args, message):
    home, _ = clean_home
    code, out, err = push(home, tmp_path / "cache", *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_an_unreachable_endpoint_is_named_after_retries(clean_home, tmp_path):
    home, _ = clean_home
    with Receiver() as receiver:
        url = receiver.url
    # The receiver is closed: nothing listens on that port any more.
    code, out, err = push(
        home, tmp_path / "cache", "--endpoint", url, "--retries", "2", "--backoff", "0.001"
    )
    assert code == 1
    assert "Traceback" not in err
    assert f"{url}: 3 attempts failed; last: ConnectError" in err
    assert "stopped: the endpoint is unreachable" in out


def test_an_unreachable_endpoint_fails_fast_with_default_retries(clean_home, tmp_path):
    """With the defaults (5 retries, 1 s doubling) a closed port took 31 s of pauses before a
    word: a connection that cannot be made is now tried 3 times, 0.5 s apart, and the
    message says nothing was sent."""
    home, _ = clean_home
    with Receiver() as receiver:
        url = receiver.url
    code, out, err = push(home, tmp_path / "cache", "--endpoint", url)
    assert code == 1
    assert "Traceback" not in err
    pauses = [float(p) for p in re.findall(r"retrying in ([0-9.]+) s", err)]
    assert len(pauses) == 2 and all(p <= 0.5 for p in pauses), err
    assert f"cannot reach {url}: 3 attempts failed; last: ConnectError" in err
    assert "nothing was sent" in err
    assert "already delivered" not in out + err
    assert "stopped: the endpoint is unreachable" in out


def test_a_refusing_endpoint_stops_at_once(clean_home, tmp_path):
    home, _ = clean_home
    with Receiver() as receiver:
        receiver.fail_after(0, 5, 401)
        code, out, err = push(home, tmp_path / "cache", "--endpoint", receiver.url)
        assert code == 1
        assert len(receiver.requests) == 1, "a 401 is not retried"
    assert "HTTP 401" in err and "stopped: the endpoint refused a batch" in out
    assert "Traceback" not in err


def test_protobuf_body_is_protobufs_own_mapping_of_the_otlp_json(clean_home, tmp_path):
    """encode.to_protobuf builds the request field by field; protobuf's JSON mapping of the
    same document (ids as base64) must give the identical message."""
    import base64

    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    home, manifest = clean_home
    documents = []
    for entry in manifest["sessions"][:12]:  # the first twelve, whichever have traces
        if not entry["ledger"] or not entry["traces"]:
            continue
        conn = open_readonly(home / entry["ledger"], tmp_path / "read")
        try:
            schema = read_schema(conn)
            documents += [
                export_trace(load_trace(conn, schema, t), entry["id"]) for t in entry["traces"]
            ]
        finally:
            conn.close()
    document = merge(documents)
    mapped = json.loads(json.dumps(document))
    for resource_spans in mapped["resourceSpans"]:
        for scope in resource_spans["scopeSpans"]:
            for span in scope["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if span.get(name):
                        span[name] = base64.b64encode(bytes.fromhex(span[name])).decode()
    expected = json_format.ParseDict(mapped, ExportTraceServiceRequest())
    assert ExportTraceServiceRequest.FromString(to_protobuf(document)) == expected
    assert len(expected.resource_spans) > 10


def test_each_labelled_home_pushes_its_spans_under_its_own_label(homes_dir, tmp_path):
    """`--homes-dir`: every span says which machine's home it came from (`capsem.home`), and
    each home's spans are exactly that home's rows."""
    with Receiver() as receiver:
        result = CliRunner().invoke(
            cli,
            [
                "capsem",
                "push-otlp",
                "--homes-dir",
                str(homes_dir),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--endpoint",
                receiver.url,
            ],
            catch_exceptions=False,
        )
        assert result.exit_code == 0, result.output
        assert_no_duplicates(receiver)
        assert_span_ids_unique(receiver)
        spans = list(receiver.spans)
    by_home: dict[str, list] = defaultdict(list)
    for span in spans:
        by_home[span.resource["capsem.home"]].append(span)
    assert set(by_home) == {"alpha", "beta"}
    for label, own in by_home.items():
        assert {s.resource["capsem.session.id"].split("--")[0] for s in own} == {label}
        home = homes_dir / label
        manifest = json.loads((home / "manifest.json").read_text())
        roots = {s.trace_id: s.attributes["capsem.trace_id"] for s in own if s.name in ROOT_NAMES}
        got = {
            (roots[s.trace_id], s.attributes["capsem.table"], s.attributes["capsem.row_id"])
            for s in own
            if s.name not in ROOT_NAMES
        }
        assert got == expected_rows(home, manifest, tmp_path / f"read-{label}")


def test_a_legacy_session_and_its_compressed_twin_each_push_under_their_own_id(
    clean_home, tmp_path
):
    """A 0.x session dir holding a gzip of another session's ledger (a copy: Capsem's vacuum
    replaces a dir's session.db by its .gz, never writes a second dir) is another session by
    its dir (spec §3.7, §1.3): its spans go under its own id, in traces of their own, and the
    original's stay under the original's. Only a fork (recorded in the registry or main.db)
    shares its parent's copied rows, sent once for the parent."""
    source, manifest = clean_home
    home = tmp_path / "home"
    shutil.copytree(source, home, symlinks=True)
    legacy = next(
        s for s in manifest["sessions"] if s["kind"] == "legacy" and s["ledger"] and s["traces"]
    )
    twin_id = "20260402-080000-7a1b"
    twin_dir = home / "sessions" / twin_id
    twin_dir.mkdir()
    with (
        open(home / legacy["ledger"], "rb") as raw,
        gzip.open(twin_dir / "session.db.gz", "wb") as packed,
    ):
        shutil.copyfileobj(raw, packed)
    with Receiver() as receiver:
        code, out, err = push(home, tmp_path / "cache", "--endpoint", receiver.url)
        assert code == 0, out + err
        assert_no_duplicates(receiver)
        assert_span_ids_unique(receiver)
        by_session: dict[str, set[str]] = {}
        for span in receiver.spans:
            if span.name in ROOT_NAMES:
                sid = span.resource.get("session.id")
                by_session.setdefault(sid, set()).add(span.attributes["capsem.trace_id"])
        assert by_session.get(twin_id), "the twin's traces were not sent under its own id"
        assert by_session[twin_id] == by_session[legacy["id"]]
        otlp_ids = {
            sid: {s.trace_id for s in receiver.spans if s.resource.get("session.id") == sid}
            for sid in (twin_id, legacy["id"])
        }
        assert not otlp_ids[twin_id] & otlp_ids[legacy["id"]]  # traces of their own
        sent = len(receiver.spans)
        code, out, _ = push(home, tmp_path / "cache", "--endpoint", receiver.url)
        assert code == 0 and len(receiver.spans) == sent  # a second push sends nothing
