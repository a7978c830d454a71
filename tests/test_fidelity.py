"""Verdicts on ledgers written the way Capsem's writer writes them (issue: one rule book).

Each test builds its case from Capsem's real DDL with `tests/capsem_writer.py` (the spec's
account of writer.rs and the provider interpreters, independent of the project's generator)
and asserts the verdict a Capsem engineer would sign.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from datasette_capsem.catalog.catalog import Catalog
from datasette_capsem.checks import check_session
from datasette_capsem.config import load_settings
from datasette_capsem.readonly import open_readonly
from tests.capsem_writer import HEAD, MAIN_HEAD, Ledger, blake3_ref, ddl, new_event_id
from tests.helpers import make_datasette, snapshot_tree

pytestmark = pytest.mark.asyncio(loop_scope="session")

AMBIENT = "5f2c9a0d41e7b3c8"  # CAPSEM_TRACE_ID: 16 hex, set by the service for every VM


def turn() -> str:
    return str(uuid.uuid4())


def session_ledger(home: Path, era: str = HEAD, sid: str | None = None) -> Ledger:
    sid = sid or str(uuid.uuid4())
    return Ledger(home / "run" / "sessions" / sid / "session.db", era)


def report_of(home: Path, ledger: Ledger, cache: Path, profile: str = "full"):
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache)})
    session = Catalog(settings).get(ledger.path.parent.name)
    assert session is not None
    conn = open_readonly(session.ledger_path, cache)
    try:
        return session, check_session(conn, session=session, live=session.live, profile=profile)
    finally:
        conn.close()


def problems(report) -> dict[str, int]:
    found: dict[str, int] = {}
    for finding in report.problems:
        found[finding.kind] = found.get(finding.kind, 0) + finding.count
    return found


# -- 1. Gemini reuses call ids ---------------------------------------------------------------


async def test_gemini_call_ids_recurring_in_consecutive_steps_are_not_early(tmp_path):
    home = tmp_path / "home"
    ledger, trace = session_ledger(home), turn()
    gemini = {
        "provider": "google",
        "model": "gemini-2.5-pro",
        "path": "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
    }
    # Step 1 emits gemini_read_file_0; step 2 carries its result and emits gemini_read_file_0
    # again (the index restarts in every response); step 3 carries that result and stops.
    first = ledger.model_call(1, trace, **gemini)
    ledger.tool_call(first, "gemini_read_file_0", "read_file", trace, 1)
    second = ledger.model_call(2, trace, **gemini)
    ledger.tool_response(second, "gemini_read_file_0", trace)
    ledger.tool_call(second, "gemini_read_file_0", "read_file", trace, 2)
    third = ledger.model_call(3, trace, **gemini)
    ledger.tool_response(third, "gemini_read_file_0", trace)
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert report.verdict == "ok", problems(report)


async def test_a_response_carried_before_any_call_of_its_id_is_still_an_error(tmp_path):
    home = tmp_path / "home"
    ledger, trace = session_ledger(home), turn()
    first = ledger.model_call(1, trace, stop="tool_use")
    ledger.tool_response(first, "toolu_01early", trace)  # consumed by the emitting call itself
    ledger.tool_call(first, "toolu_01early", "bash", trace, 1)
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert problems(report).get("response_before_call") == 1


# -- 2. Id schemes that can never match -----------------------------------------------------


async def test_ollama_results_are_one_info_finding_not_orphans(tmp_path):
    home = tmp_path / "home"
    ledger, trace = session_ledger(home), turn()
    ollama = {"provider": "ollama", "model": "qwen3:8b", "path": "/api/chat"}
    ledger.net(1, trace, domain="host.docker.internal", path="/api/chat", port=11434)
    first = ledger.model_call(1, trace, **ollama)
    ledger.tool_response(first, "ollama_tool_result_2", trace)  # no call is ever parsed
    second = ledger.model_call(2, trace, **ollama)
    ledger.tool_response(second, "ollama_tool_result_2", trace)  # the history, repeated
    ledger.tool_response(second, "ollama_tool_result_4", trace)
    # A genuine orphan in the same file, from another provider, must still be reported.
    other = ledger.model_call(3, trace)
    ledger.tool_response(other, "toolu_01nobodyaskedforthis", trace)
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    found = problems(report)
    assert found.get("unpairable_tool_ids") == 3
    assert found.get("orphan_tool_response") == 1
    assert "tool_call_without_response" not in found
    unpairable = [f for f in report.problems if f.kind == "unpairable_tool_ids"]
    assert all(f.severity == "info" for f in unpairable)
    assert any("ollama" in reason for f in unpairable for reason in f.details.values())


async def test_gemini_bare_name_calls_of_spring_2026_are_unpairable_not_broken(tmp_path):
    # Files of 2026-03-13..06-10 log the call under the bare tool name and its result as
    # gemini_<name>_<n> (spec §4.3); the 0.16 DDL is of that period and has no trace_id on them.
    home = tmp_path / "home"
    ledger = Ledger(
        home / "sessions" / "20260402-101500-a1b2" / "session.db", "session_0.16_2026-04-02.sql"
    )
    trace = turn()
    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    first = ledger.model_call(1, trace, provider="google", path=path)
    ledger.tool_call(first, "read_file", "read_file", trace, 1)
    second = ledger.model_call(2, trace, provider="google", path=path)
    ledger.tool_response(second, "gemini_read_file_0", trace)
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    found = problems(report)
    assert found.get("unpairable_tool_ids") == 2  # the call and its result
    assert "orphan_tool_response" not in found and "tool_call_without_response" not in found
    assert report.verdict == "ok"


# -- 3. Stop reasons are the provider's -----------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "path", "flagged"),
    [
        ("google", "/v1beta/models/gemini-2.5-pro:generateContent", False),
        ("openai", "/v1/responses", False),
        ("anthropic", "/v1/messages", True),
        ("openai", "/v1/chat/completions", True),
    ],
)
async def test_end_turn_with_tool_calls_is_a_mismatch_only_where_the_protocol_marks_tool_turns(
    tmp_path, provider, path, flagged
):
    home = tmp_path / "home"
    ledger, trace = session_ledger(home), turn()
    call = ledger.model_call(1, trace, provider=provider, path=path, stop="end_turn")
    ledger.tool_call(call, "call_1", "bash", trace, 1)
    answer = ledger.model_call(2, trace, provider=provider, path=path, stop="end_turn")
    ledger.tool_response(answer, "call_1", trace)
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert ("stop_reason_mismatch" in problems(report)) is flagged


# -- 4. body_hash covers the original bytes; 7. uploads are not model traffic -----------------


async def test_a_large_upload_is_unverifiable_and_ordinary_traffic(datasette_for, tmp_path):
    home = tmp_path / "home"
    ledger, trace = session_ledger(home), turn()
    ledger.model_call(1, trace)
    net = ledger.net(2, trace, domain="www.googleapis.com", path="/upload/drive/v3/files")
    event_id = ledger.conn.execute("SELECT event_id FROM net_events WHERE id = ?", [net]).fetchone()
    original = b"\xef\xbf\xbd" * (4 * 1024 * 1024)  # lossy UTF-8 of a binary upload: 12 MiB
    stored = original[: 10 * 1024 * 1024]  # the writer keeps the first 10 MiB
    ledger.insert(
        "event_body_blobs",
        event_id=event_id[0],
        event_type="http.request",
        source_table="net_events",
        direction="request",
        content_type="application/octet-stream",
        original_bytes=len(original),
        stored_bytes=len(stored),
        truncated=1,
        body_hash=blake3_ref(original),
        body=stored,
        trace_id=trace,
        turn_id=trace,
        created_at="2026-08-20T10:00:02.000000Z",
    )
    blob = ledger.conn.execute("SELECT max(id) FROM event_body_blobs").fetchone()[0]
    ledger.close()
    session, report = report_of(home, ledger, tmp_path / "cache")
    found = problems(report)
    for kind in ("blob_hash_mismatch", "blob_size_mismatch", "ai_traffic_unparsed"):
        assert kind not in found, found
    datasette = await datasette_for(home)
    body = await datasette.client.get(
        f"/-/capsem/sessions/{session.id}/events/{event_id[0]}/bodies/{blob}.json"
    )
    assert body.status_code == 200
    assert body.json()["hash_verdict"] == "unverifiable"
    assert body.json()["hash_note"] == (
        f"unverifiable (the hash covers all {len(original)} original bytes)"
    )
    page = await datasette.client.get(f"/-/capsem/sessions/{session.id}/events/{event_id[0]}")
    assert "unverifiable (the hash covers all" in page.text
    assert "does not match" not in page.text


async def test_a_whole_blob_with_a_wrong_hash_is_still_a_mismatch(tmp_path):
    home = tmp_path / "home"
    ledger, trace = session_ledger(home), turn()
    call = ledger.model_call(1, trace)
    event_id = ledger.conn.execute("SELECT event_id FROM model_calls WHERE id = ?", [call])
    body = b'{"messages": []}'
    ledger.insert(
        "event_body_blobs",
        event_id=event_id.fetchone()[0],
        event_type="model.call",
        source_table="model_calls",
        direction="request",
        content_type="application/json",
        original_bytes=len(body),
        stored_bytes=len(body),
        truncated=0,
        body_hash=blake3_ref(body + b" "),
        body=body,
        trace_id=trace,
        turn_id=trace,
        created_at="2026-08-20T10:00:01.000000Z",
    )
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert problems(report).get("blob_hash_mismatch") == 1


@pytest.mark.parametrize(
    ("domain", "path", "flagged"),
    [
        ("oauth2.googleapis.com", "/token", False),
        ("play.googleapis.com", "/log", False),
        ("www.googleapis.com", "/upload/storage/v1/b/x/o", False),
        ("api.anthropic.com", "/v1/messages", True),
        ("generativelanguage.googleapis.com", "/v1beta/models/g:streamGenerateContent", True),
    ],
)
async def test_ai_traffic_unparsed_only_for_model_api_paths(tmp_path, domain, path, flagged):
    home = tmp_path / "home"
    ledger = session_ledger(home)
    ledger.model_call(1, turn())  # the file has model calls, in another trace
    ledger.net(2, turn(), domain=domain, path=path)
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert ("ai_traffic_unparsed" in problems(report)) is flagged


# -- 5. Legacy capsem run rows ---------------------------------------------------------------


def main_db(home: Path) -> sqlite3.Connection:
    path = home / "sessions" / "main.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(ddl(MAIN_HEAD))
    return conn


async def test_run_rows_stopped_before_1_3_are_not_compared_on_zeroed_columns(tmp_path):
    home = tmp_path / "home"
    sid = "code-3"  # /run ids are <profile>-<n>
    ledger = session_ledger(home, "session_1.2_2026-05-24.sql", sid)
    trace = turn()
    ledger.model_call(1, trace)
    ledger.net(1, trace)
    ledger.insert(
        "exec_events",
        timestamp="2026-06-20T10:00:00Z",
        exec_id=1,
        command="make",
        exit_code=0,
        source="api",
    )
    for pid in (10, 11):
        ledger.insert(
            "audit_events",
            timestamp="2026-06-20T10:00:00Z",
            pid=pid,
            ppid=1,
            uid=0,
            exe="/usr/bin/make",
            argv="make",
        )
    ledger.close()
    conn = main_db(home)
    with conn:
        # handle_run's rollup: requests and file events counted, 0 for tokens, cost, tool
        # calls, exec_count and audit_event_count (spec §3.5).
        conn.execute(
            "INSERT INTO sessions (id, mode, command, status, created_at, stopped_at,"
            " total_requests, allowed_requests, denied_requests, total_input_tokens,"
            " total_output_tokens, total_estimated_cost, total_tool_calls, total_file_events,"
            " exec_count, audit_event_count) VALUES (?, 'run', 'make', 'stopped',"
            " '2026-06-20T10:00:00Z', '2026-06-26T10:05:00Z', 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)",
            [sid],
        )
    conn.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert "rollup_mismatch" not in problems(report)


# -- 6. Live means a writer ------------------------------------------------------------------


async def test_a_reader_left_empty_wal_is_a_finished_session(tmp_path):
    home = tmp_path / "home"
    ledger, trace = session_ledger(home), turn()
    ledger.model_call(1, trace)
    ledger.insert(
        "exec_events",
        event_id=new_event_id(),
        timestamp="2026-08-20T10:00:00Z",
        exec_id=1,
        command="sleep 99",
        source="api",
        trace_id=trace,
    )
    ledger.close()
    # What check_session.py leaves beside a finished ledger: a 0-byte -wal and a 32 KiB -shm.
    reader = sqlite3.connect(f"file:{ledger.path}?mode=ro", uri=True)
    reader.execute("SELECT count(*) FROM model_calls").fetchone()
    reader.close()
    assert Path(f"{ledger.path}-wal").stat().st_size == 0
    assert Path(f"{ledger.path}-shm").exists()
    before = snapshot_tree(home)
    session, report = report_of(home, ledger, tmp_path / "cache")
    assert not session.live and not report.live
    assert problems(report).get("exec_incomplete") == 1  # a stopped session: findings shown
    assert snapshot_tree(home) == before  # and nothing was written, not even the -shm


async def test_a_non_empty_wal_is_a_live_writer(tmp_path):
    home = tmp_path / "home"
    ledger, trace = session_ledger(home), turn()
    ledger.model_call(1, trace)
    ledger.conn.commit()  # committed into the WAL, not checkpointed: the writer is running
    try:
        assert Path(f"{ledger.path}-wal").stat().st_size > 0
        session, report = report_of(home, ledger, tmp_path / "cache")
        assert session.live and report.live
    finally:
        ledger.conn.close()


# -- 8. The ambient trace --------------------------------------------------------------------


@pytest.fixture
def ambient_home(tmp_path) -> tuple[Path, str, list[int]]:
    home = tmp_path / "home"
    ledger = session_ledger(home)
    calls = [ledger.model_call(second, AMBIENT) for second in (1, 5, 9)]  # title, probe, Q&A
    for second in (1, 5, 9):
        ledger.net(second, AMBIENT)
    ledger.net(3, AMBIENT, domain="pypi.org", path="/simple/requests/", method="GET")
    ledger.insert(
        "dns_events",
        event_id=new_event_id(),
        timestamp="2026-08-20T10:00:03.000000Z",
        qname="pypi.org",
        qtype=1,
        qclass=1,
        rcode=0,
        decision="allowed",
        trace_id=AMBIENT,
        turn_id=AMBIENT,
    )
    agent = turn()
    loop = ledger.model_call(20, agent, stop="tool_use")
    ledger.tool_call(loop, "toolu_01", "bash", agent, 20)
    ledger.tool_response(ledger.model_call(21, agent), "toolu_01", agent)
    ledger.close()
    return home, ledger.path.parent.name, calls


@pytest_asyncio.fixture
async def datasette_for(tmp_path):
    async def make(home: Path):
        return await make_datasette(home, tmp_path / "serve-cache", index_refresh_seconds=0)

    return make


async def test_the_ambient_trace_is_exchanges_and_a_lane_not_a_turn(ambient_home, datasette_for):
    home, sid, calls = ambient_home
    datasette = await datasette_for(home)
    page = (await datasette.client.get(f"/-/capsem/sessions/{sid}.json")).json()
    listed = page["traces"]
    assert page["turns"] == 1 and page["exchanges"] == 3
    assert sorted(t["exchange"] for t in listed if t["exchange"] is not None) == calls
    assert all(t["href"].endswith(f"?exchange={t['exchange']}") for t in listed if t["exchange"])

    graph = (
        await datasette.client.get(f"/-/capsem/sessions/{sid}/traces/{AMBIENT}/graph.json")
    ).json()
    assert graph["ambient"] is True
    assert not [n for n in graph["nodes"] if n["type"] == "turn"]
    lanes = {n["table"]: n["lane"] for n in graph["nodes"] if n.get("table") == "dns_events"}
    assert lanes == {"dns_events": "ambient"}

    one = await datasette.client.get(
        f"/-/capsem/sessions/{sid}/traces/{AMBIENT}/graph.json?exchange={calls[1]}"
    )
    tables = sorted(n["table"] for n in one.json()["nodes"] if n.get("table"))
    assert tables == ["model_calls", "net_events"]  # the call and its own HTTP row

    otlp = (
        await datasette.client.get(f"/-/capsem/sessions/{sid}/traces/{AMBIENT}.otlp.json")
    ).json()
    spans = [s for rs in otlp["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    roots = sorted(s["name"] for s in spans if "parentSpanId" not in s)
    assert roots == ["capsem.ambient", "capsem.exchange", "capsem.exchange", "capsem.exchange"]
    assert len({s["traceId"] for s in spans}) == 4

    chain = (
        await datasette.client.get(f"/{sid}/trace_chain.json?trace_id={AMBIENT}&_shape=objects")
    ).json()["rows"]
    by_table = {(r["table_name"], r["lane"]) for r in chain}
    assert ("model_calls", "exchange") in by_table and ("dns_events", "ambient") in by_table
    bad = await datasette.client.get(f"/-/capsem/sessions/{sid}/traces/{AMBIENT}?exchange=x")
    assert bad.status_code == 400


# -- 9. Readiness: ours, and Capsem's --------------------------------------------------------


async def test_readiness_says_what_capsem_would_do_without_calling_old_files_broken(tmp_path):
    home = tmp_path / "home"
    old = session_ledger(home, "session_1.1_2026-05-11.sql")
    old.model_call(1, turn())
    old.close()
    _, report = report_of(home, old, tmp_path / "cache")
    found = problems(report)
    assert "schema_not_ready" not in found
    assert found.get("capsem_ready_schema") == 1
    assert next(f for f in report.problems if f.kind == "capsem_ready_schema").severity == "info"

    current = session_ledger(home)
    current.model_call(1, turn())
    current.close()
    _, report = report_of(home, current, tmp_path / "cache")
    assert "capsem_ready_schema" not in problems(report)


# -- 10. Era labels and optional columns -------------------------------------------------------


async def test_era_labels_and_mcp_usage_on_march_files(tmp_path, datasette_for):
    home = tmp_path / "home"
    head = session_ledger(home, "session_1.3_2026-06-27.sql")
    head.model_call(1, turn())
    head.close()
    _, report = report_of(home, head, tmp_path / "cache")
    assert report.era == "1.3"

    march = Ledger(
        home / "sessions" / "20260301-120000-abcd" / "session.db", "session_0x_2026-03-01.sql"
    )
    march.insert(
        "mcp_calls",
        timestamp="2026-03-01T12:00:00Z",
        server_name="github",
        method="tools/call",
        tool_name="search",
        decision="allowed",
    )
    march.close()
    datasette = await datasette_for(home)
    usage = await datasette.client.get("/20260301-120000-abcd/mcp_tool_usage.json?_shape=objects")
    assert usage.status_code == 200, usage.text
    assert [(r["server_name"], r["tool_name"], r["calls"]) for r in usage.json()["rows"]] == [
        ("github", "search", 1)
    ]
