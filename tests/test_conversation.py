"""The conversation view (`…/traces/<id>/conversation.json`): the turn as chat, rebuilt from the
request and response bodies of each provider format Capsem records, what is new in each step
marked, the raw bodies one link away, and the credential policy applied to every message.

Bodies are written the way each provider sends them (tests/conversation_support.py) into a copy
of the generated home with sqlite3; the generated home's own bodies are read as they are."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import pytest_asyncio

from datasette_capsem.graph.conversation import _part, mark_new, parse_reply, parse_request
from datasette_capsem.graph.exchanges import is_ambient
from tests import conversation_support as cs
from tests.helpers import actor_cookies, make_datasette
from tests.trace_support import clean_current, ledger, of_era, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")
SECRET = "sk-ant-api03-PLANTEDSECRET0123456789abcdef"


def turn_traces(home: Path, manifest: dict) -> list[tuple[dict, str]]:
    """(session, trace) of clean current-era turns with at least three model calls."""
    found = []
    for session in clean_current(manifest):
        conn = sqlite3.connect(f"file:{home / session['ledger']}?mode=ro", uri=True)
        try:
            for trace in session["traces"]:
                count = conn.execute(
                    "SELECT count(*) FROM model_calls WHERE trace_id = ?", (trace,)
                ).fetchone()[0]
                if count >= 3 and not is_ambient(trace):
                    found.append((session, trace))
        finally:
            conn.close()
    return found


@pytest.fixture(scope="module")
def provider_home(capsem_home, manifest, tmp_path_factory):
    """A copy of the generated home where one turn per provider format carries that format's
    bodies; the anthropic turn's user message holds a credential and hostile markup."""
    home = cs.copy_home(capsem_home, tmp_path_factory.mktemp("conversation"))
    turns = turn_traces(home, manifest)
    assert len(turns) >= len(cs.BUILDERS), "the generated home has too few three-call turns"
    placed = {}
    for fmt, (session, trace) in zip(cs.BUILDERS, turns, strict=False):
        user = cs.USER
        if fmt == "anthropic":
            user = f"{cs.USER} {cs.HOSTILE} my key is {SECRET}"
        ids = cs.write_turn(home / session["ledger"], trace, fmt, user)
        placed[fmt] = {"session": session, "trace": trace, "ids": ids, "user": user}
    return home, placed


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def datasette(provider_home, tmp_path_factory):
    home, _ = provider_home
    return await make_datasette(
        home,
        tmp_path_factory.mktemp("conversation-cache"),
        index_refresh_seconds=0,
        view_secrets={"id": "operator"},
    )


async def get_conversation(datasette, session_id: str, trace: str, **kwargs) -> dict:
    response = await datasette.client.get(
        trace_url(session_id, trace, "/conversation.json"), **kwargs
    )
    assert response.status_code == 200, response.text[:300]
    return response.json()


def shape(parts: list[dict]) -> list[tuple]:
    return [(p["role"], p["type"], p.get("name")) for p in parts]


@pytest.mark.parametrize("fmt", list(cs.BUILDERS))
async def test_each_provider_format_reads_as_chat(datasette, provider_home, fmt):
    home, placed = provider_home
    turn = placed[fmt]
    session = turn["session"]
    data = await get_conversation(
        datasette, session["id"], turn["trace"], cookies=actor_cookies(datasette, "operator")
    )
    steps = data["steps"]
    assert [s["model_call_id"] for s in steps[:3]] == turn["ids"]
    assert all(s["format"] == fmt for s in steps[:3]), [s["format"] for s in steps]
    first, second, third = steps[:3]

    # Step 1: the system prompt and the user's message are new; the reply says and calls.
    assert shape(first["messages"]) == [("system", "text", None), ("user", "text", None)]
    assert first["messages"][0]["text"] == cs.SYSTEM
    assert first["messages"][1]["text"] == turn["user"]
    assert all(m["new"] for m in first["messages"])
    assert shape(first["reply"]) == [
        ("assistant", "text", None),
        ("assistant", "tool_call", "read_file"),
    ]
    assert first["reply"][0]["text"] == cs.FIRST_TEXT
    assert json.loads(first["reply"][1]["text"]) == {"path": "a.py"}

    # Step 2: the history is repeated (system, user, the assistant's reply echoed back); only
    # the tool result is new.
    assert second["request"]["repeated"] == 4, second["request"]
    assert shape(second["messages"]) == [("tool", "tool_result", second["messages"][0].get("name"))]
    assert cs.CALLS[0][2] in second["messages"][0]["text"]
    assert shape(second["reply"]) == [("assistant", "tool_call", "bash")]
    assert json.loads(second["reply"][0]["text"]) == {"command": "pytest -q"}

    # Step 3: again only the new tool result; the turn ends with text.
    assert third["request"]["repeated"] == 6, third["request"]
    assert [m["type"] for m in third["messages"]] == ["tool_result"]
    assert cs.CALLS[1][2] in third["messages"][0]["text"]
    assert [(m["type"], m["text"]) for m in third["reply"]] == [("text", cs.FINAL)]
    if fmt not in ("gemini", "ollama"):  # these formats carry no call ids
        assert second["messages"][0]["call_id"] == first["reply"][1]["call_id"]

    # The raw bodies are one link away, and the figures are the ledger's.
    with ledger(home, session, Path(datasette.plugin_config("datasette-capsem")["cache_dir"])) as c:
        row = c.execute(
            "SELECT input_tokens, output_tokens, estimated_cost_usd FROM model_calls WHERE id = ?",
            (turn["ids"][0],),
        ).fetchone()
    assert (first["input_tokens"], first["output_tokens"]) == (row[0], row[1])
    assert first["cost_usd"] == pytest.approx(row[2])
    for side in ("request", "response"):
        assert first[side]["source"] == "event_body_blobs"
        page = await datasette.client.get(
            first[side]["page"], cookies=actor_cookies(datasette, "operator")
        )
        assert page.status_code == 200
    assert first["href"].endswith(f"/model_calls/{turn['ids'][0]}")


async def test_masked_for_an_actor_without_view_secrets(datasette, provider_home):
    _, placed = provider_home
    turn = placed["anthropic"]
    masked = await get_conversation(datasette, turn["session"]["id"], turn["trace"])
    text = json.dumps(masked)
    assert "PLANTEDSECRET" not in text
    assert "[redacted:api-key]" in masked["steps"][0]["messages"][1]["text"]
    shown = await get_conversation(
        datasette,
        turn["session"]["id"],
        turn["trace"],
        cookies=actor_cookies(datasette, "operator"),
    )
    assert SECRET in shown["steps"][0]["messages"][1]["text"]


async def test_generated_turns_of_every_era(datasette, provider_home, manifest):
    """The generated home's own bodies (and, before body blobs, the request preview and the
    reply columns) give one step per model call of the trace, in the ledger's order."""
    home, placed = provider_home
    rewritten = {t["trace"] for t in placed.values()}
    checked, linked = set(), []
    for era in ("head", "1.2", "0.9"):
        for session in of_era(manifest, era)[: 6 if era == "head" else 2]:
            for trace in [t for t in session.get("traces", []) if t not in rewritten][:2]:
                conn = sqlite3.connect(f"file:{home / session['ledger']}?mode=ro", uri=True)
                try:
                    ids = [
                        r[0]
                        for r in conn.execute(
                            "SELECT id FROM model_calls WHERE trace_id = ? ORDER BY timestamp, id",
                            (trace,),
                        )
                    ]
                finally:
                    conn.close()
                data = await get_conversation(datasette, session["id"], trace)
                assert [s["model_call_id"] for s in data["steps"]] == ids
                for step in data["steps"]:
                    assert step["request"]["source"] in (
                        "event_body_blobs",
                        "model_calls.request_body_preview",
                    ), step["request"]
                    assert step["messages"] or step["request"]["repeated"]
                    assert step["reply"] or step["response"]["problem"]
                    checked.add(step["request"]["source"])
                    for part in step["reply"]:  # a call the ledger parsed links to its row
                        if part["type"] == "tool_call" and part.get("row"):
                            linked.append(part)
    assert checked == {"event_body_blobs", "model_calls.request_body_preview"}, checked
    assert linked and all(
        p["href"].endswith("/tool_calls/" + p["row"].split(":")[1]) for p in linked
    )


async def test_bad_trace_is_a_404(datasette, provider_home):
    _, placed = provider_home
    session = placed["anthropic"]["session"]
    response = await datasette.client.get(trace_url(session["id"], "nope", "/conversation.json"))
    assert response.status_code == 404
    assert response.json()["error"] == "Unknown trace"


async def test_non_streamed_replies_and_odd_bodies():
    """One JSON reply per provider, as each answers without streaming, and bodies that are
    not chat at all."""
    anthropic = {
        "type": "message",
        "stop_reason": "end_turn",
        "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "A"}],
    }
    responses = {
        "status": "completed",
        "output": [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "why"}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "B"}],
            },
        ],
    }
    gemini = [
        {"candidates": [{"content": {"parts": [{"text": "C", "thought": True}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "D"}]}, "finishReason": "STOP"}]},
    ]
    ollama = {"message": {"role": "assistant", "content": "E", "thinking": "t"}, "done": True}
    cases = [
        (anthropic, [("thinking", "hm"), ("text", "A")]),
        (responses, [("thinking", "why"), ("text", "B")]),
        (gemini, [("thinking", "C"), ("text", "D")]),
        (ollama, [("thinking", "t"), ("text", "E")]),
    ]
    for body, expected in cases:
        reply = parse_reply(json.dumps(body))
        assert [(m["type"], m["text"]) for m in reply["messages"]] == expected, body
    assert parse_reply("<html>")["problem"] == "the response is not JSON"
    assert parse_request("{}")["problem"] == "not a chat request body"
    assert parse_request("not json")["problem"] == "the request body is not JSON"
    assert parse_request(json.dumps({"input": "hi"}))["messages"][0]["text"] == "hi"


async def test_rewritten_and_dropped_history():
    """A request that compacts its history: a summary stands where earlier messages were
    (`rewrites`), the dropped ones are counted, the rest is repeated."""

    before = [
        _part("system", "text", "S"),
        _part("user", "text", "U"),
        _part("assistant", "text", "A"),
        _part("tool", "tool_result", "R", call_id="1"),
    ]
    messages = [
        _part("system", "text", "S"),
        _part("user", "text", "summary of U and A"),
        _part("tool", "tool_result", "R", call_id="1"),
        _part("user", "text", "next"),
    ]
    counts = mark_new(messages, before)
    assert counts == {"repeated": 2, "new": 2, "dropped": 2}
    assert [m["new"] for m in messages] == [False, True, False, True]
    assert messages[1].get("rewrites") and not messages[3].get("rewrites")
