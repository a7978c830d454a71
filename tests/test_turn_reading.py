"""Reading a turn (issue 28, points 1 and 2): a model call's detail read as chat (messages by
role, tool calls with their arguments, results, the reply, the model parameters, its step in
the conversation), and each turn told apart by the first words of what was asked and of how
the reply began: in the session's turn list, the trace page's header and title, and on the
model rows of the span tree. Every preview is free text: masked for a viewer, hidden whole
with `hide_free_text`, escaped everywhere.

Bodies are written the way each provider sends them (tests/conversation_support.py) into a
copy of the generated home with sqlite3."""

from __future__ import annotations

import json
import sqlite3

import pytest
import pytest_asyncio

from tests import conversation_support as cs
from tests.helpers import actor_cookies, make_datasette
from tests.test_conversation import turn_traces
from tests.trace_support import session_url, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")
SECRET = "sk-ant-api03-PLANTEDSECRET0123456789abcdef"
ASKED = f"Use key {SECRET} to fix the failing test {cs.HOSTILE}"


@pytest.fixture(scope="module")
def reading_home(capsem_home, manifest, tmp_path_factory):
    """A copy of the generated home where one turn per provider format carries that format's
    bodies, its user message a credential and hostile markup."""
    home = cs.copy_home(capsem_home, tmp_path_factory.mktemp("reading"))
    turns = turn_traces(home, manifest)
    placed = {}
    for fmt, (session, trace) in zip(cs.BUILDERS, turns, strict=False):
        ids = cs.write_turn(home / session["ledger"], trace, fmt, ASKED)
        placed[fmt] = {"session": session, "trace": trace, "ids": ids}
    return home, placed


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def datasette(reading_home, tmp_path_factory):
    home, _ = reading_home
    return await make_datasette(
        home,
        tmp_path_factory.mktemp("reading-cache"),
        index_refresh_seconds=0,
        view_secrets={"id": "operator"},
    )


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def hiding(reading_home, tmp_path_factory):
    home, _ = reading_home
    return await make_datasette(
        home, tmp_path_factory.mktemp("reading-hide"), index_refresh_seconds=0, hide_free_text=True
    )


def operator(datasette) -> dict:
    return {"cookies": actor_cookies(datasette, "operator")}


async def node(datasette, turn: dict, index: int, **kwargs) -> dict:
    url = trace_url(turn["session"]["id"], turn["trace"], "/node.json")
    response = await datasette.client.get(url + f"?id=model_calls:{turn['ids'][index]}", **kwargs)
    assert response.status_code == 200, response.text[:300]
    return response.json()


@pytest.mark.parametrize("fmt", list(cs.BUILDERS))
async def test_model_call_detail_reads_as_chat(datasette, reading_home, fmt):
    _, placed = reading_home
    turn = placed[fmt]
    detail = await node(datasette, turn, 1, **operator(datasette))
    chat = detail["chat"]
    assert chat["format"] == fmt
    shape = [(m["role"], m["type"]) for m in chat["messages"]]
    assert shape[:2] == [("system", "text"), ("user", "text")]
    assert ("assistant", "tool_call") in shape and ("tool", "tool_result") in shape
    call = next(m for m in chat["messages"] if m["type"] == "tool_call")
    assert call["name"] == "read_file" and json.loads(call["text"]) == {"path": "a.py"}
    result = next(m for m in chat["messages"] if m["type"] == "tool_result")
    assert "return None" in result["text"]
    assert SECRET in chat["messages"][1]["text"]  # the operator sees what was sent
    assert [(m["type"], m.get("name")) for m in chat["reply"]] == [("tool_call", "bash")]
    assert json.loads(chat["reply"][0]["text"]) == {"command": "pytest -q"}
    assert chat["parameters"].get("model") or fmt == "gemini"  # Gemini names it in the path
    assert chat["parameters"].get("tools", 2) == 2  # when the request offers them
    assert chat["step"] == 2
    assert chat["conversation"].endswith("#conversation-step-2")
    assert chat["conversation"].startswith(trace_url(turn["session"]["id"], turn["trace"]))
    assert not any(m.get("new") for m in chat["messages"] + chat["reply"])


async def test_model_call_parameters_and_step_links(datasette, reading_home):
    _, placed = reading_home
    chat = (await node(datasette, placed["anthropic"], 0))["chat"]
    assert chat["parameters"]["model"] == "claude-sonnet-4-20250514"
    assert chat["parameters"]["max_tokens"] == 8192
    assert chat["parameters"]["tools"] == 2
    assert chat["step"] == 1
    for side in ("request", "response"):
        assert "/bodies/" in chat[side]["page"]
    # A tool call of the reply links to its tool_calls row.
    linked = [m for m in chat["reply"] if m["type"] == "tool_call" and m.get("href")]
    assert not linked or linked[0]["href"].split("/")[-2] == "tool_calls"


async def test_model_call_chat_masked_for_a_viewer(datasette, hiding, reading_home):
    _, placed = reading_home
    turn = placed["anthropic"]
    masked = await node(datasette, turn, 0)
    text = json.dumps(masked)
    assert "PLANTEDSECRET" not in text
    assert "[redacted:" in masked["chat"]["messages"][1]["text"]
    hidden = await node(hiding, turn, 0)
    assert "PLANTEDSECRET" not in json.dumps(hidden)
    assert "fix the failing test" not in json.dumps(hidden["chat"])
    assert hidden["chat"]["messages"][1]["text"].startswith("[hidden")


async def test_turn_list_shows_what_was_asked_and_answered(datasette, hiding, reading_home):
    _, placed = reading_home
    turn = placed["openai-chat"]
    url = session_url(turn["session"]["id"]) + "?_size=500"
    shown = (await datasette.client.get(url, **operator(datasette))).text
    # What the user asked (its first words, escaped) and how the last reply began.
    assert f"Use key {SECRET} to fix the failing test" in shown
    assert "Done: the tests pass." in shown
    assert "<img src=x" not in shown and "&lt;img src=x" in shown
    masked = (await datasette.client.get(url)).text
    assert "Use key [redacted:" in masked and "PLANTEDSECRET" not in masked
    assert "Done: the tests pass." in masked
    hidden = (await hiding.client.get(url)).text
    assert "PLANTEDSECRET" not in hidden
    assert "fix the failing test" not in hidden and "Done: the tests pass." not in hidden
    data = (await datasette.client.get(session_url(turn["session"]["id"], ".json"))).json()
    listed = {t["trace_id"]: t for t in data.get("traces", [])}
    if turn["trace"] in listed:
        assert listed[turn["trace"]]["response_preview"] == "Done: the tests pass."


async def test_trace_header_and_title_say_what_the_turn_was(datasette, hiding, reading_home):
    _, placed = reading_home
    turn = placed["anthropic"]
    url = trace_url(turn["session"]["id"], turn["trace"])
    page = (await datasette.client.get(url, **operator(datasette))).text
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]
    assert "Use key" in title and "Done: the tests pass." in title and turn["trace"] in title
    assert "<img" not in title
    header = page.split("capsem-turn-preview", 1)[1][:2000]
    assert "Use key" in header and "Done: the tests pass." in header
    masked = (await datasette.client.get(url)).text
    assert "PLANTEDSECRET" not in masked and "Use key [redacted:" in masked
    hidden = (await hiding.client.get(url)).text
    assert "PLANTEDSECRET" not in hidden and "Use key" not in hidden
    assert "Done: the tests pass." not in hidden
    assert "[hidden" in hidden.split("<title>", 1)[1].split("</title>", 1)[0]


async def test_model_rows_say_which_tools_or_how_the_reply_began(datasette, hiding, reading_home):
    home, placed = reading_home
    turn = placed["anthropic"]
    url = trace_url(turn["session"]["id"], turn["trace"], "/tree.json")
    tree = (await datasette.client.get(url)).json()
    spans = {}
    stack = [tree["root"]]
    while stack:
        span = stack.pop()
        spans[span["id"]] = span
        stack.extend(span.get("children", []))
    conn = sqlite3.connect(f"file:{home / turn['session']['ledger']}?mode=ro", uri=True)
    try:
        tools = {
            row[0]: row[1]
            for row in conn.execute(
                "SELECT model_call_id, group_concat(tool_name, ', ') FROM "
                "(SELECT model_call_id, tool_name FROM tool_calls WHERE model_call_id IN "
                f"({','.join('?' * len(turn['ids']))}) ORDER BY call_index, id) "
                "GROUP BY model_call_id",
                turn["ids"],
            )
        }
        # Capsem's own assembly of each reply's text (text_content).
        texts = dict(
            conn.execute(
                f"SELECT id, text_content FROM model_calls WHERE id IN "
                f"({','.join('?' * len(turn['ids']))})",
                turn["ids"],
            ).fetchall()
        )
    finally:
        conn.close()
    previews = []
    for call_id in turn["ids"]:
        span = spans[f"model_calls:{call_id}"]
        if call_id in tools:
            assert ", ".join(span["tools"]) == tools[call_id]
        elif texts[call_id]:
            assert span["response_preview"] == " ".join(texts[call_id].split())[:100]
            previews.append(span["response_preview"])
    assert previews, "no model row of the turn has a reply preview"
    hidden = json.dumps((await hiding.client.get(url)).json())
    assert not any(p in hidden for p in previews)
