"""Compare two turns (`/-/capsem/compare?a=SESSION:TRACE&b=SESSION:TRACE`, and `.json`): tool
calls aligned (same, changed, missing), per-step tokens, cost, latency and outcome checked
against the ledgers' own figures, the first divergence, bad input as a clear 4xx, and a
session the actor may not view answering exactly as an unknown one."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import urlencode

import pytest
import pytest_asyncio

from datasette_capsem.session.compare import align_tools, argument_hash
from tests.helpers import make_datasette
from tests.trace_support import clean_current

pytestmark = pytest.mark.asyncio(loop_scope="session")

# A credential in turn b's changed arguments: shown masked to a reader without view_secrets.
PLANTED = "ghp_" + "Z9x8Y7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def url(a: str | None, b: str | None, suffix: str = ".json") -> str:
    params = {k: v for k, v in (("a", a), ("b", b)) if v is not None}
    return f"/-/capsem/compare{suffix}?{urlencode(params)}"


def tool_turns(home: Path, manifest: dict) -> list[tuple[dict, str, list[tuple]]]:
    """(session, trace, [(id, tool_name, arguments)]) of clean turns with two or more tool
    calls, their tool calls in the order the ledger gives them."""
    found = []
    for session in clean_current(manifest):
        conn = sqlite3.connect(f"file:{home / session['ledger']}?mode=ro", uri=True)
        try:
            for trace in session["traces"]:
                tools = conn.execute(
                    "SELECT tc.id, tc.tool_name, tc.arguments FROM tool_calls tc "
                    "JOIN model_calls mc ON mc.id = tc.model_call_id WHERE tc.trace_id = ? "
                    "ORDER BY mc.timestamp, mc.id, tc.call_index, tc.timestamp, tc.id",
                    (trace,),
                ).fetchall()
                if len(tools) >= 2:
                    found.append((session, trace, tools))
        finally:
            conn.close()
    return found


@pytest.fixture(scope="module")
def compare_home(capsem_home, manifest, tmp_path_factory):
    """A copy of the home where turn b repeats turn a's tool calls but for the second one's
    arguments, and a third turn (c) of a session only the actor `alice` may view."""
    home = tmp_path_factory.mktemp("compare") / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    turns = tool_turns(home, manifest)
    a = turns[0]
    b = next(t for t in turns if t[0]["id"] != a[0]["id"])
    conn = sqlite3.connect(home / b[0]["ledger"])
    try:
        for index, (row_id, _name, _args) in enumerate(b[2]):
            if index < len(a[2]):
                name, arguments = a[2][index][1], a[2][index][2]
                if index == 1:
                    arguments = json.dumps({"changed": True, "token": PLANTED})
                conn.execute(
                    "UPDATE tool_calls SET tool_name = ?, arguments = ? WHERE id = ?",
                    (name, arguments, row_id),
                )
        conn.commit()
    finally:
        conn.close()
    private = next(t for t in turns if t[0]["id"] not in (a[0]["id"], b[0]["id"]))
    # A fourth session carries a's trace id on one model call: a bare `a` trace id is ambiguous.
    twin = next(t for t in turns if t[0]["id"] not in (a[0]["id"], b[0]["id"], private[0]["id"]))
    conn = sqlite3.connect(home / twin[0]["ledger"])
    try:
        conn.execute(
            "UPDATE model_calls SET trace_id = ? WHERE id = (SELECT MIN(id) FROM model_calls "
            "WHERE trace_id = ?)",
            (a[1], twin[1]),
        )
        conn.commit()
    finally:
        conn.close()
    return home, a, b, private


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def datasette(compare_home, tmp_path_factory):
    home, _, _, private = compare_home
    metadata = {"databases": {private[0]["id"]: {"allow": {"id": "alice"}}}}
    return await make_datasette(
        home, tmp_path_factory.mktemp("compare-cache"), metadata=metadata, index_refresh_seconds=0
    )


def ledger_steps(home: Path, session: dict, trace: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{home / session['ledger']}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT id, input_tokens, output_tokens, estimated_cost_usd, duration_ms, stop_reason "
            "FROM model_calls WHERE trace_id = ? ORDER BY timestamp, id",
            (trace,),
        ).fetchall()
    finally:
        conn.close()


async def test_a_turn_against_itself_is_identical(datasette, compare_home):
    home, (session, trace, tools), _, _ = compare_home
    turn = f"{session['id']}:{trace}"
    data = (await datasette.client.get(url(turn, turn))).json()
    assert data["identical"] and data["diverged"] is None
    assert [r["status"] for r in data["tools"]] == ["same"] * len(tools)
    assert [r["a"]["tool_call_id"] for r in data["tools"]] == [t[0] for t in tools]
    assert all(v == 0 for v in data["delta"].values())


async def test_figures_are_the_ledgers(datasette, compare_home):
    home, a, b, _ = compare_home
    data = (await datasette.client.get(url(f"{a[0]['id']}:{a[1]}", f"{b[0]['id']}:{b[1]}"))).json()
    for side, (session, trace, tools) in (("a", a), ("b", b)):
        rows = ledger_steps(home, session, trace)
        steps = data[side]["steps"]
        assert [s["model_call_id"] for s in steps] == [r[0] for r in rows]
        for step, row in zip(steps, rows, strict=True):
            assert (step["input_tokens"], step["output_tokens"]) == (row[1], row[2])
            assert step["cost_usd"] == pytest.approx(row[3])
            assert step["duration_ms"] == pytest.approx(row[4])
            assert step["stop_reason"] == row[5]
            assert step["href"].endswith(f"/model_calls/{row[0]}")
        totals = data[side]["totals"]
        assert totals["input_tokens"] == sum(r[1] for r in rows)
        assert totals["output_tokens"] == sum(r[2] for r in rows)
        assert totals["cost_usd"] == pytest.approx(sum(r[3] for r in rows), abs=1e-6)
        assert totals["tool_calls"] == len(tools)
        assert totals["final_stop_reason"] == rows[-1][5]
    assert data["delta"]["input_tokens"] == (
        data["b"]["totals"]["input_tokens"] - data["a"]["totals"]["input_tokens"]
    )
    for row in data["steps"]:
        if row["a"] and row["b"]:
            assert row["delta"]["output_tokens"] == (
                row["b"]["output_tokens"] - row["a"]["output_tokens"]
            )


async def test_the_first_divergence_is_the_changed_arguments(datasette, compare_home):
    home, a, b, _ = compare_home
    data = (await datasette.client.get(url(f"{a[0]['id']}:{a[1]}", f"{b[0]['id']}:{b[1]}"))).json()
    rows = data["tools"]
    assert rows[0]["status"] == "same"
    assert rows[1]["status"] == "changed" and rows[1]["why"] == "arguments differ"
    assert rows[1]["b"]["arguments_hash"] == argument_hash(
        json.dumps({"changed": True, "token": PLANTED})
    )
    assert data["diverged"]["at"] == "tool_call" and data["diverged"]["index"] == 1
    assert not data["identical"]
    shared = min(len(a[2]), len(b[2]))
    extra = abs(len(a[2]) - len(b[2]))
    assert data["counts"]["same"] + data["counts"]["changed"] == shared
    assert data["counts"]["missing_in_a"] + data["counts"]["missing_in_b"] == extra
    # The HTML page shows the same, every id a link.
    page = await datasette.client.get(url(f"{a[0]['id']}:{a[1]}", f"{b[0]['id']}:{b[1]}", ""))
    assert page.status_code == 200
    assert "First divergence: tool call 2" in page.text
    assert f'/model_calls/{data["a"]["steps"][0]["model_call_id"]}"' in page.text
    assert f'/tool_calls/{rows[1]["b"]["tool_call_id"]}"' in page.text


async def test_alignment_of_tool_sequences():
    def tools(*names):
        return [{"name": n, "arguments_hash": argument_hash("{}"), "step": 0} for n in names]

    rows = align_tools(tools("read", "bash", "edit"), tools("read", "grep", "edit", "test"))
    assert [(r["status"], r["why"]) for r in rows] == [
        ("same", None),
        ("changed", "another tool"),
        ("same", None),
        ("missing_in_a", None),
    ]


@pytest.mark.parametrize(
    "a, b, status, title",
    [
        ("x:", "x:y", 400, "Bad a"),
        (":t", "x:y", 400, "Bad a"),
        ("x" * 300 + ":t", "x:y", 400, "Bad a"),
        ("no-such-session:t", "no-such-session:t", 404, "Unknown session"),
    ],
)
async def test_bad_input_is_a_clear_4xx(datasette, a, b, status, title):
    response = await datasette.client.get(url(a, b))
    assert response.status_code == status
    assert response.json()["error"] == title
    html = await datasette.client.get(url(a, b, ""))
    assert html.status_code == status and title in html.text


async def test_unknown_trace_is_a_404(datasette, compare_home):
    _, a, _, _ = compare_home
    response = await datasette.client.get(url(f"{a[0]['id']}:{a[1]}", f"{a[0]['id']}:nope"))
    assert response.status_code == 404 and response.json()["error"] == "Unknown trace"


async def test_a_session_the_actor_may_not_view_is_unknown(datasette, compare_home):
    """Denied and missing read alike: same status, same title, no suggestion, no trace
    looked up (a bad trace id in a denied session gives the same answer as a good one)."""
    from tests.helpers import actor_cookies

    _, a, _, private = compare_home
    mine = f"{a[0]['id']}:{a[1]}"
    denied = (await datasette.client.get(url(mine, f"{private[0]['id']}:{private[1]}"))).json()
    denied_bad_trace = (await datasette.client.get(url(mine, f"{private[0]['id']}:nope"))).json()
    assert denied["status"] == denied_bad_trace["status"] == 404
    assert denied["error"] == denied_bad_trace["error"] == "Unknown session"
    assert denied["suggestions"] == [] and private[1] not in json.dumps(denied)
    allowed = await datasette.client.get(
        url(mine, f"{private[0]['id']}:{private[1]}"), cookies=actor_cookies(datasette, "alice")
    )
    assert allowed.status_code == 200


@pytest.mark.parametrize("a, b, title", [(None, "x:y", "Missing a"), ("x:y", None, "Missing b")])
async def test_the_json_without_two_turns_is_a_400(datasette, a, b, title):
    """The JSON is a comparison or nothing; the page is a form (below)."""
    response = await datasette.client.get(url(a, b))
    assert response.status_code == 400 and response.json()["error"] == title


async def test_compare_alone_is_a_form(datasette):
    response = await datasette.client.get("/-/capsem/compare")
    assert response.status_code == 200
    assert 'name="a"' in response.text and 'name="b"' in response.text
    assert "<h1>Compare two turns</h1>" in response.text


async def test_one_turn_offers_the_others_of_its_session_and_other_sessions(
    datasette, compare_home
):
    _, a, b, _ = compare_home
    given = f"{a[0]['id']}:{a[1]}"
    page = await datasette.client.get(url(given, None, ""))
    assert page.status_code == 200
    assert f'value="{given}"' in page.text  # the a box is filled
    assert "compare with" in page.text and a[0]["id"] in page.text
    assert 'class="capsem-compare-sessions"' in page.text  # the newest other sessions
    assert "[redacted" not in page.text  # no link the credential masker would take for a token
    other = await datasette.client.get(
        "/-/capsem/compare?" + urlencode({"a": given, "other": b[0]["id"]})
    )
    assert other.status_code == 200
    assert urlencode({"a": given, "b": f"{b[0]['id']}:{b[1]}"}) in other.text.replace("&amp;", "&")


async def test_turns_ticked_on_the_session_page_are_compared(datasette, compare_home):
    _, a, b, _ = compare_home
    pair = [("turn", f"{a[0]['id']}:{a[1]}"), ("turn", f"{b[0]['id']}:{b[1]}")]
    data = (await datasette.client.get("/-/capsem/compare.json?" + urlencode(pair))).json()
    assert (data["a"]["trace_id"], data["b"]["trace_id"]) == (a[1], b[1])
    three = await datasette.client.get("/-/capsem/compare?" + urlencode([*pair, pair[0]]))
    assert three.status_code == 400 and "Too many turns" in three.text


async def test_two_bare_trace_ids_find_their_sessions(datasette, compare_home):
    _, a, b, _ = compare_home
    data = (await datasette.client.get(url(b[1], b[1]))).json()
    assert data["a"]["session_id"] == data["b"]["session_id"] == b[0]["id"]
    assert data["identical"]
    mixed = (await datasette.client.get(url(f"{a[0]['id']}:{a[1]}", b[1]))).json()
    assert mixed["b"]["session_id"] == b[0]["id"] and mixed["a"]["trace_id"] == a[1]


async def test_an_ambiguous_bare_trace_id_names_the_candidates(datasette, compare_home):
    _, a, b, _ = compare_home
    response = await datasette.client.get(url(a[1], b[1]))
    assert response.status_code == 409
    data = response.json()
    assert data["error"] == "Ambiguous trace id"
    candidates = [s["id"] for s in data["suggestions"]]
    assert f"{a[0]['id']}:{a[1]}" in candidates and len(candidates) == 2
    assert a[0]["id"] in data["message"]
    html = await datasette.client.get(url(a[1], b[1], ""))
    assert html.status_code == 409 and "give it as SESSION_ID:TRACE_ID" in html.text


async def test_an_unknown_bare_trace_id_is_a_404(datasette):
    response = await datasette.client.get(url("no-such-trace", "no-such-trace"))
    assert response.status_code == 404 and response.json()["error"] == "Unknown trace"


async def test_arguments_are_indented_json_masked_for_a_viewer(datasette, compare_home):
    _, a, b, _ = compare_home
    page = await datasette.client.get(url(f"{a[0]['id']}:{a[1]}", f"{b[0]['id']}:{b[1]}", ""))
    assert "&#34;changed&#34;: true" in page.text or "&quot;changed&quot;: true" in page.text
    assert PLANTED not in page.text and "[redacted:" in page.text
    assert "sha256:" in page.text  # the hash stays, as the tooltip
    assert ".0</td>" not in page.text  # integral floats are shown as integers
    data = (await datasette.client.get(url(f"{a[0]['id']}:{a[1]}", f"{b[0]['id']}:{b[1]}"))).json()
    changed = data["tools"][1]["b"]["arguments"]
    assert changed.startswith("{\n  ") and PLANTED not in changed
