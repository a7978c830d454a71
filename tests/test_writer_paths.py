"""The writer paths that put a tool result away from its call (issue: pair what the writer pairs).

Each case is written through `tests/capsem_writer.Writer`, a port of Capsem's own trace
decision (telemetry_hook.rs:619-668 with `TraceState`) and request parser: requests go in as the
agent sends them, and the rows are whatever that logic makes of them. None of these sessions is
broken, so none may report an orphan or an unanswered call; a result whose call was recorded
nowhere earlier still is an ERROR.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from datasette_capsem.catalog.catalog import Catalog
from datasette_capsem.checks import check_session
from datasette_capsem.config import load_settings
from datasette_capsem.readonly import open_readonly
from tests.capsem_writer import MAIN_HEAD, Writer, ddl, new_event_id, stamp
from tests.helpers import make_datasette
from tests.test_fidelity import problems, report_of, session_ledger

pytestmark = pytest.mark.asyncio(loop_scope="session")

AMBIENT, RESUMED = "5f2c9a0d41e7b3c8", "a07e55c1d2b94f63"  # CAPSEM_TRACE_ID of two processes
PAIRING_KINDS = ("orphan_tool_response", "tool_call_without_response", "response_before_call")


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def anthropic_result(call_id: str) -> dict:
    content = [{"type": "tool_result", "tool_use_id": call_id, "content": "ok"}]
    return {"role": "user", "content": content}


def anthropic_turn_with_one_tool(writer: Writer, call_id: str = "toolu_01") -> list[dict]:
    """A user asks, the model calls a tool: the history the agent sends next."""
    history = [user("list the files")]
    writer.exchange(
        "anthropic", {"messages": history}, calls=[{"id": call_id, "name": "bash"}], stop="tool_use"
    )
    return history + [{"role": "assistant", "content": [{"type": "tool_use", "id": call_id}]}]


def finding_rows(report, kind: str) -> dict[str, str]:
    return next((f.details for f in report.findings if f.kind == kind and f.count), {})


def assert_paired(report, path: str) -> None:
    found = problems(report)
    assert not {k: found[k] for k in PAIRING_KINDS if k in found}, found
    reasons = finding_rows(report, "result_in_another_trace")
    assert reasons, f"no result_in_another_trace finding: {found}"
    assert all("answers tool call #" in why for why in reasons.values())
    assert any(path in why for why in reasons.values()), reasons


async def test_gemini_cli_on_an_api_key_answers_under_its_own_id(tmp_path):
    """Path 1: the writer names the call gemini_<name>_<i>, Gemini CLI its result
    <name>_<epoch-ms>_<i> (Capsem's own data/fixtures/test.db has write_file_1772463049393_0)."""
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    contents = [{"role": "user", "parts": [{"text": "write a poem to a file"}]}]
    call_trace = writer.exchange(
        "google", {"contents": contents}, calls=[{"name": "write_file"}], stop="tool_use"
    )
    contents += [
        {"role": "model", "parts": [{"functionCall": {"name": "write_file"}}]},
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "write_file_1772463049393_0",
                        "name": "write_file",
                        "response": {"ok": 1},
                    }
                }
            ],
        },
    ]
    result_trace = writer.exchange("google", {"contents": contents})
    ledger.close()
    assert result_trace != call_trace  # the writer split the pair: nothing was pending under it
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert_paired(report, "Gemini CLI names the result write_file_1772463049393_0")


async def test_the_responses_api_resends_earlier_turns_results(tmp_path):
    """Path 2: every function_call_output of the input is logged, so turn 2 logs turn 1's
    result again under turn 2's trace (request_parser.rs:292-306)."""
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    items = [{"role": "user", "content": "run the tests"}]
    first = writer.exchange(
        "openai", {"input": items}, calls=[{"id": "call_1", "name": "shell"}], stop="tool_use"
    )
    items += [
        {"type": "function_call", "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "3 passed"},
    ]
    assert writer.exchange("openai", {"input": items}) == first  # end of turn 1
    items += [{"role": "user", "content": "now lint"}]
    second = writer.exchange(
        "openai", {"input": items}, calls=[{"id": "call_2", "name": "shell"}], stop="tool_use"
    )
    items += [
        {"type": "function_call", "call_id": "call_2"},
        {"type": "function_call_output", "call_id": "call_2", "output": "clean"},
    ]
    assert writer.exchange("openai", {"input": items}) == second
    ledger.close()
    assert second != first
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert_paired(report, "recorded in an earlier turn, sent again with the history")


@pytest.mark.parametrize("status", [529, 429, 503, 403])
async def test_a_failed_tool_result_step_and_its_retry(tmp_path, status):
    """Path 3: the failed exchange is recorded, carries the result and completes the trace
    (telemetry_hook.rs:466-479, 638-653); the retry of the same body finds nothing pending."""
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    history = anthropic_turn_with_one_tool(writer) + [anthropic_result("toolu_01")]
    call_trace = writer.exchange("anthropic", {"messages": history}, stop=None, status=status)
    retry_trace = writer.exchange("anthropic", {"messages": history})
    ledger.close()
    assert retry_trace == AMBIENT != call_trace
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert_paired(report, "recorded before a failed exchange and its retry")


async def test_a_stream_cut_on_a_tool_result_step_then_a_retry_that_calls_again(tmp_path):
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    history = anthropic_turn_with_one_tool(writer) + [anthropic_result("toolu_01")]
    writer.exchange("anthropic", {"messages": history}, stop=None)  # cut before any tool call
    retry = writer.exchange(
        "anthropic",
        {"messages": history},
        calls=[{"id": "toolu_02", "name": "bash"}],
        stop="tool_use",
    )
    history += [{"role": "assistant", "content": []}, anthropic_result("toolu_02")]
    assert writer.exchange("anthropic", {"messages": history}) == retry
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert_paired(report, "recorded before a failed exchange and its retry")


async def test_a_persistent_vm_resumed_mid_turn(tmp_path):
    """Path 4: resume spawns a new capsem-process, with an empty TraceState and a new ambient
    id (capsem-process main.rs:414-416, telemetry.rs:606-618)."""
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    history = anthropic_turn_with_one_tool(writer) + [anthropic_result("toolu_01")]
    writer.restart(RESUMED)
    assert writer.exchange("anthropic", {"messages": history}) == RESUMED
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    assert_paired(report, "recorded before the writer restarted (a resume)")


async def test_a_result_whose_call_was_recorded_nowhere_earlier_is_still_an_error(tmp_path):
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    anthropic_turn_with_one_tool(writer, "toolu_01")
    writer.exchange("anthropic", {"messages": [user("go on"), anthropic_result("toolu_99")]})
    # A call emitted only after the result that answers it is no earlier call either.
    writer.exchange(
        "anthropic",
        {"messages": [user("again")]},
        calls=[{"id": "toolu_99", "name": "bash"}],
        stop="tool_use",
    )
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    found = problems(report)
    assert found.get("orphan_tool_response") == 1
    assert found.get("tool_call_without_response") == 2  # toolu_01, and toolu_99 of the end
    assert not finding_rows(report, "result_in_another_trace")


async def test_gemini_cli_ids_pair_only_with_an_earlier_call_of_that_tool(tmp_path):
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    contents = [{"role": "user", "parts": [{"text": "read it"}]}]
    writer.exchange(
        "google", {"contents": contents}, calls=[{"name": "read_file"}], stop="tool_use"
    )
    contents += [
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "write_file_1772463049393_0",
                        "name": "write_file",
                        "response": {},
                    }
                }
            ],
        }
    ]
    writer.exchange("google", {"contents": contents})
    ledger.close()
    _, report = report_of(home, ledger, tmp_path / "cache")
    found = problems(report)
    assert found.get("orphan_tool_response") == 1  # no write_file call was ever emitted
    assert found.get("tool_call_without_response") == 1  # and read_file's result never came


async def test_the_pairing_is_shown_on_the_trace_and_event_pages(tmp_path):
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    history = anthropic_turn_with_one_tool(writer) + [anthropic_result("toolu_01")]
    call_trace = writer.state.pending["toolu_01"]
    writer.restart(RESUMED)
    writer.exchange("anthropic", {"messages": history})
    ledger.close()
    sid = ledger.path.parent.name
    datasette = await make_datasette(home, tmp_path / "serve-cache", index_refresh_seconds=0)
    graph = await datasette.client.get(f"/-/capsem/sessions/{sid}/traces/{RESUMED}/graph.json")
    assert graph.status_code == 200, graph.text
    edges = [e for e in graph.json()["edges"] if e["type"] == "responded-in"]
    assert edges and not any(e["broken"] for e in edges), edges
    outside = [node for node in graph.json()["nodes"] if node.get("external")]
    assert any(call_trace in str(node.get("trace_href")) for node in outside), outside
    # The call's trace says where its answer went; its event page too.
    call_graph = await datasette.client.get(
        f"/-/capsem/sessions/{sid}/traces/{call_trace}/graph.json"
    )
    answered = [e for e in call_graph.json()["edges"] if e["type"] == "responded-in"]
    assert any(e.get("cross_trace") and "(a resume)" in e.get("why", "") for e in answered)
    call = next(n for n in call_graph.json()["nodes"] if n["id"] == "tool_calls:1")
    page = await datasette.client.get(call["href"])
    assert page.status_code == 200 and "answered in trace" in page.text
    assert "recorded before the writer restarted (a resume)" in page.text
    rows = await datasette.client.get(f"/{sid}/tool_results_across_traces.json?_shape=array")
    assert rows.status_code == 200, rows.text
    assert [r["writer_path"] for r in rows.json()] == ["resume"]
    assert rows.json()[0]["call_trace_id"] == call_trace


async def test_a_crashed_session_is_not_live_and_its_wal_rows_are_read(tmp_path):
    """§4.7: a killed capsem-process leaves main.db `crashed` and a non-empty WAL."""
    home = tmp_path / "home"
    ledger = session_ledger(home)
    sid = ledger.path.parent.name
    writer = Writer(ledger, AMBIENT)
    anthropic_turn_with_one_tool(writer)
    ledger.insert(
        "exec_events",
        event_id=new_event_id(),
        timestamp=stamp(3),
        exec_id=1,
        command="sleep 99",
        source="api",
        trace_id=AMBIENT,
    )
    ledger.conn.commit()  # committed into the WAL, never checkpointed: the writer was killed
    main = home / "sessions" / "main.db"
    main.parent.mkdir(parents=True)
    index = sqlite3.connect(main)
    index.executescript(ddl(MAIN_HEAD))
    index.execute(
        "INSERT INTO sessions (id, mode, status, created_at, stopped_at) "
        "VALUES (?, 'ephemeral', 'crashed', ?, ?)",
        (sid, stamp(0), stamp(5)),
    )
    index.commit()
    index.close()
    try:
        assert Path(f"{ledger.path}-wal").stat().st_size > 0
        session, report = report_of(home, ledger, tmp_path / "cache")
        assert not session.live and not report.live
        assert session.writer_ended
        found = problems(report)
        assert found.get("exec_incomplete") == 1  # the only-when-stopped check ran
        assert found.get("unclean_wal") == 1
        assert found.get("tool_call_without_response") == 1  # read from the WAL
    finally:
        ledger.conn.close()


async def test_a_failed_dir_with_a_wal_is_not_live(tmp_path):
    """The service renames a dead session's dir `<id>-failed-<stamp>` (main.rs:1289-1300)."""
    home, sid = tmp_path / "home", "0f8e7d6c-1111-4222-8333-444455556666"
    ledger = session_ledger(home, sid=f"{sid}-failed-20260820-101500")
    Writer(ledger, AMBIENT).exchange("anthropic", {"messages": [user("hi")]})
    ledger.conn.commit()
    try:
        settings = load_settings({"capsem_home": str(home), "cache_dir": str(tmp_path / "c")})
        session = Catalog(settings).get(sid)
        assert session is not None and session.kind == "failed" and session.writer_wal
        assert not session.live
    finally:
        ledger.conn.close()


async def test_a_turn_the_writer_split_reads_as_one_user_turn(tmp_path):
    """Logical turns: the retry's new trace carries on the turn it was split from, on the
    session page and its JSON, and the count of user turns follows."""
    home = tmp_path / "home"
    ledger = session_ledger(home)
    writer = Writer(ledger, AMBIENT)
    history = anthropic_turn_with_one_tool(writer) + [anthropic_result("toolu_01")]
    first = writer.exchange("anthropic", {"messages": history}, stop=None)  # a cut stream
    retry = writer.exchange(
        "anthropic",
        {"messages": history},
        calls=[{"id": "toolu_02", "name": "bash"}],
        stop="tool_use",
    )
    history += [{"role": "assistant", "content": []}, anthropic_result("toolu_02")]
    writer.exchange("anthropic", {"messages": history})
    writer.restart(RESUMED)  # and a resume whose result lands in the new ambient trace
    history2 = anthropic_turn_with_one_tool(writer, "toolu_03") + [anthropic_result("toolu_03")]
    third = writer.state.pending["toolu_03"]
    writer.restart("b17e55c1d2b94f00")
    writer.exchange("anthropic", {"messages": history2})
    ledger.close()
    sid = ledger.path.parent.name
    datasette = await make_datasette(home, tmp_path / "serve-cache", index_refresh_seconds=0)
    page = (await datasette.client.get(f"/-/capsem/sessions/{sid}.json")).json()
    assert page["turns"] == 3 and page["user_turns"] == 2, page
    by_trace = {(t["trace_id"], t.get("exchange")): t for t in page["traces"]}
    assert by_trace[(retry, None)]["continues"]["trace_id"] == first
    assert by_trace[(first, None)]["continues"] is None
    resumed = next(t for t in page["traces"] if t["trace_id"] == "b17e55c1d2b94f00")
    assert resumed["continues"]["trace_id"] == third and "resume" in resumed["continues"]["why"]
    html = (await datasette.client.get(f"/-/capsem/sessions/{sid}")).text
    assert f'continues turn <a href="/-/capsem/sessions/{sid}/traces/{first}">' in html
    assert "2 user turns, the writer split some" in html
    otlp = await datasette.client.get(f"/-/capsem/sessions/{sid}/traces/{retry}.otlp.json")
    spans = [s for r in otlp.json()["resourceSpans"] for ss in r["scopeSpans"] for s in ss["spans"]]
    root = next(s for s in spans if "parentSpanId" not in s)
    attrs = {a["key"]: a["value"] for a in root["attributes"]}
    assert attrs["capsem.continues_trace_id"] == {"stringValue": first}
    first_spans = (
        await datasette.client.get(f"/-/capsem/sessions/{sid}/traces/{first}.otlp.json")
    ).json()
    call_span = next(
        s["spanId"]
        for r in first_spans["resourceSpans"]
        for ss in r["scopeSpans"]
        for s in ss["spans"]
        if s["name"].endswith("bash")
    )
    assert [link["spanId"] for link in root["links"]] == [call_span]


async def test_capsems_own_march_fixture_keeps_its_verdict(tmp_path):
    """data/fixtures/test.db of Capsem: a warning (the 403 call), no pairing finding."""
    fixture = Path(__file__).parent / "capsem_fixtures" / "march_2026_test.db"
    sid = "20260302-145000-a1b2"
    target = tmp_path / "home" / "run" / "sessions" / sid / "session.db"
    target.parent.mkdir(parents=True)
    target.write_bytes(fixture.read_bytes())
    settings = load_settings(
        {"capsem_home": str(tmp_path / "home"), "cache_dir": str(tmp_path / "cache")}
    )
    session = Catalog(settings).get(sid)
    conn = open_readonly(session.ledger_path, tmp_path / "cache")
    try:
        report = check_session(conn, session=session, live=session.live)
    finally:
        conn.close()
    assert report.verdict == "warning"
    assert problems(report) == {
        "model_call_quality": 1,
        "legacy_tables": 2,
        "capsem_ready_schema": 1,
    }
