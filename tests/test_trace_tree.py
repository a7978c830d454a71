"""The span tree (`…/traces/<id>/tree.json`) and the detail panel's data (`…/node.json`),
checked against the ledger's own figures: per-span tokens add up to the trace's totals, to
`SUM()` over the ledger, and over a whole session to the `token_totals` canned query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_asyncio

from datasette_capsem import redaction
from datasette_capsem.generate.era_templates import SESSION_ERAS
from datasette_capsem.graph.bodies import decode_body
from datasette_capsem.graph.tree import flatten
from tests.helpers import make_datasette
from tests.trace_support import (
    clean_current,
    defect_sessions,
    hostile_session,
    ledger,
    of_era,
    trace_url,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "thinking_tokens")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("trace-tree-cache")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def datasette(capsem_home, cache_dir):
    return await make_datasette(capsem_home, cache_dir, index_refresh_seconds=0)


async def get_tree(datasette, session_id: str, trace: str) -> dict:
    response = await datasette.client.get(trace_url(session_id, trace, "/tree.json"))
    assert response.status_code == 200, response.text[:300]
    return response.json()


def ledger_totals(conn, where: str, params) -> dict:
    row = conn.execute(
        "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        "coalesce(sum(CASE WHEN json_valid(usage_details) "
        "THEN json_extract(usage_details, '$.cache_read') END), 0), "
        "coalesce(sum(CASE WHEN json_valid(usage_details) "
        "THEN json_extract(usage_details, '$.thinking') END), 0), "
        f"coalesce(sum(estimated_cost_usd), 0) FROM model_calls WHERE {where}",
        params,
    ).fetchone()
    return dict(zip(("model_calls", *TOKENS, "cost_usd"), tuple(row), strict=True))


def span_sums(tree: dict) -> dict:
    calls = [
        s
        for s in flatten(tree)
        if s["type"] == "model_call" and not s.get("missing") and not s.get("external")
    ]
    sums = {field: sum(s.get(field) or 0 for s in calls) for field in TOKENS}
    sums["cost_usd"] = sum(s.get("cost_usd") or 0.0 for s in calls)
    sums["model_calls"] = len(calls)
    return sums


def assert_same(a: dict, b: dict) -> None:
    for key in ("model_calls", *TOKENS):
        assert a[key] == b[key], (key, a, b)
    assert a["cost_usd"] == pytest.approx(b["cost_usd"], abs=1e-6)


async def test_tree_nests_a_turn(datasette, manifest):
    session = clean_current(manifest)[0]
    tree = await get_tree(datasette, session["id"], session["traces"][0])
    root = tree["root"]
    assert root["type"] == "trace" and root["name"] == session["traces"][0]
    turns = [c for c in root["children"] if c["type"] == "turn"]
    assert turns, "a current-era turn trace has its turn under the trace"
    call = next(c for c in turns[0]["children"] if c["type"] == "model_call")
    for key in ("model", "stop_reason", "duration_ms", *TOKENS, "cost_usd"):
        assert key in call
    kinds = {c["type"] for c in call["children"]}
    assert {"net_event", "body", "security_event"} <= kinds, kinds
    emitting = [
        s
        for s in flatten(tree)
        if s["type"] == "model_call"
        and any(c["type"] == "tool_call" for c in s.get("children", []))
    ]
    assert emitting, "some model call emitted tool calls"
    tool = next(c for c in emitting[0]["children"] if c["type"] == "tool_call")
    response = next(c for c in tool["children"] if c["type"] == "tool_response")
    assert response["consumed_by"].startswith("model_calls:")
    assert turns[0]["totals"]["model_calls"] >= 1
    assert turns[0]["duration_ms"] is not None
    # Each graph node appears once in the tree.
    graph = (
        await datasette.client.get(trace_url(session["id"], session["traces"][0], "/graph.json"))
    ).json()
    spans = flatten(tree)
    assert sorted(s["id"] for s in spans) == sorted(n["id"] for n in graph["nodes"])


@pytest.mark.parametrize("era", SESSION_ERAS)
async def test_span_tokens_add_up_to_the_trace_and_the_ledger(
    datasette, manifest, capsem_home, cache_dir, era
):
    sessions = [s for s in of_era(manifest, era) if s.get("traces")][:2]
    if not sessions:
        pytest.skip(f"no {era} session with traces in the generated home")
    for session in sessions:
        with ledger(capsem_home, session, cache_dir) as conn:
            for trace in session["traces"][:4]:
                tree = await get_tree(datasette, session["id"], trace)
                sums = span_sums(tree)
                assert_same(sums, tree["totals"])
                assert_same(sums, ledger_totals(conn, "trace_id = ?", [trace]))


async def test_every_trace_of_a_session_adds_up_to_token_totals(
    datasette, manifest, capsem_home, cache_dir
):
    checked = 0
    for session in clean_current(manifest)[:3]:
        with ledger(capsem_home, session, cache_dir) as conn:
            untraced = conn.execute(
                "SELECT count(*) FROM model_calls WHERE trace_id IS NULL"
            ).fetchone()[0]
            traces = [r[0] for r in conn.execute("SELECT DISTINCT trace_id FROM model_calls")]
        if untraced:
            continue
        total = {k: 0 for k in ("model_calls", *TOKENS, "cost_usd")}
        for trace in traces:
            for key, value in span_sums(await get_tree(datasette, session["id"], trace)).items():
                total[key] += value
        query = (
            await datasette.client.get(f"/{session['id']}/token_totals.json?_shape=array")
        ).json()
        canned = {
            "model_calls": sum(r["calls"] for r in query),
            "input_tokens": sum(r["input_tokens"] for r in query),
            "output_tokens": sum(r["output_tokens"] for r in query),
            "cache_read_tokens": sum(r["cache_read_tokens"] or 0 for r in query),
            "thinking_tokens": sum(r["thinking_tokens"] or 0 for r in query),
            "cost_usd": sum(r["cost_usd"] for r in query),
        }
        assert_same(total, canned)
        checked += 1
    assert checked


CRITICAL_TYPES = ("model_call", "tool_call", "mcp_call", "exec_event")


def assert_critical_path(tree: dict) -> int:
    """The tree's critical path keeps its definition (graph/waterfall.py): it ends with the
    span that ends last, each span on it ended by the time the next one started, and none
    ended later than it by then; the first one started after every candidate had not yet
    ended. Returns its length."""
    spans = {s["id"]: s for s in flatten(tree)}
    candidates = [
        (s["t"], s["t"] + (s.get("duration_ms") or 0.0))
        for s in spans.values()
        if s["type"] in CRITICAL_TYPES
        and s.get("t") is not None
        and not s.get("missing")
        and not s.get("external")
    ]
    path = tree["critical_path"]
    assert bool(path) == bool(candidates)
    assert {i for i, s in spans.items() if s.get("critical")} == set(path)
    times = [(spans[i]["t"], spans[i]["t"] + (spans[i].get("duration_ms") or 0.0)) for i in path]
    if times:
        assert times[-1][1] == max(end for _, end in candidates)
        assert not [end for _, end in candidates if end <= times[0][0] + 1.0 and end < times[0][1]]
    for (_, before_end), (start, end) in zip(times, times[1:], strict=False):
        assert before_end <= start + 1.0
        assert not [e for _, e in candidates if before_end < e <= start + 1.0 and e < end]
    return len(path)


@pytest.mark.parametrize("era", SESSION_ERAS)
async def test_critical_path_keeps_its_definition(datasette, manifest, era):
    sessions = [s for s in of_era(manifest, era) if s.get("traces")][:2]
    if not sessions:
        pytest.skip(f"no {era} session with traces in the generated home")
    for session in sessions:
        for trace in session["traces"][:3]:
            tree = await get_tree(datasette, session["id"], trace)
            assert_critical_path(tree)
            # The waterfall (the trace's .json) reads the rows, not the graph: same path.
            data = (await datasette.client.get(trace_url(session["id"], trace, ".json"))).json()
            waterfall = data["waterfall"]
            assert waterfall["critical_path"] == tree["critical_path"]
            assert {f"{b['table']}:{b['row_id']}" for b in waterfall["rows"] if b["critical"]} == (
                set(tree["critical_path"])
            )


async def test_conversation_unfolds_the_repeated_history(datasette, manifest):
    session = clean_current(manifest)[0]
    url = trace_url(session["id"], session["traces"][0], "/conversation.json")
    steps = (await datasette.client.get(url)).json()["steps"]
    repeated = [(n, s) for n, s in enumerate(steps, 1) if s["request"].get("repeated")]
    assert repeated, "a later step repeats the history"
    for number, step in repeated:
        found = (await datasette.client.get(f"{url}?step={number}")).json()
        assert found["step"] == number and found["model_call"] == step["model_call"]
        assert len(found["messages"]) == step["request"]["repeated"] == found["repeated"]
        assert not any(m["new"] for m in found["messages"])
        # What step n repeats was new in an earlier step or was an earlier reply.
        earlier = {
            (m["role"], m["type"], m["text"].strip())
            for s in steps[: number - 1]
            for m in s["messages"] + s["reply"]
        }
        shown = {(m["role"], m["type"], m["text"].strip()) for m in found["messages"]}
        assert shown & earlier
    for bad, status in (("0", 400), ("x", 400), (str(len(steps) + 1), 404)):
        assert (await datasette.client.get(f"{url}?step={bad}")).status_code == status


async def test_findings_of_the_graph_are_on_the_tree(datasette, manifest):
    session, defect = defect_sessions(manifest, "orphan_tool_response")[0]
    node_id = f"{defect['table']}:{defect['row_id']}"
    for trace in session["traces"]:
        tree = await get_tree(datasette, session["id"], trace)
        found = {s["id"]: s for s in flatten(tree)}
        if node_id in found:
            assert "orphan_tool_response" in found[node_id]["findings"]
            assert node_id in tree["findings"]["orphan_tool_response"]["nodes"]
            assert any(s.get("missing") for s in found.values())
            return
    pytest.fail("the orphan response is in no trace's tree")


async def test_node_detail_puts_important_fields_first(datasette, manifest, capsem_home, cache_dir):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    tree = await get_tree(datasette, session["id"], trace)
    call = next(s for s in flatten(tree) if s["type"] == "model_call")
    url = trace_url(session["id"], trace, "/node.json") + "?id=" + call["id"]
    detail = (await datasette.client.get(url)).json()
    names = [f["name"] for f in detail["fields"]]
    assert names[:2] == ["provider", "model"]
    assert all(detail["cells"][f["name"]] not in (None, "") for f in detail["fields"])
    assert detail["row"] == f"/{session['id']}/model_calls/{call['id'].split(':')[1]}"
    directions = {b["direction"] for b in detail["bodies"]}
    assert directions == {"request", "response"}
    body = next(b for b in detail["bodies"] if not b.get("deferred"))
    assert body["view"]["kind"] in ("json", "sse", "text")
    assert body["href"].endswith(".json")
    for bad, status in (("nope", 400), ("model_calls:abc", 400), ("model_calls:99999999", 404)):
        response = await datasette.client.get(
            trace_url(session["id"], trace, "/node.json") + "?id=" + bad
        )
        assert response.status_code == status


async def test_hostile_tree_is_data(datasette, manifest):
    session = hostile_session(manifest)
    for trace in session["traces"]:
        response = await datasette.client.get(trace_url(session["id"], trace, "/tree.json"))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/json")


def sse(*events: dict) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()


@pytest.mark.parametrize(
    "stream, text, thinking",
    [
        (
            sse(
                {
                    "type": "content_block_delta",
                    "delta": {"type": "thinking_delta", "thinking": "hm"},
                },
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hel"}},
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "lo"}},
            ),
            "Hello",
            "hm",
        ),
        (sse({"choices": [{"delta": {"content": "Hi"}}]}, {"choices": [{"delta": {}}]}), "Hi", ""),
        (sse({"type": "response.output_text.delta", "delta": "Yo"}), "Yo", ""),
        (
            sse(
                {
                    "candidates": [
                        {"content": {"parts": [{"text": "a"}, {"text": "b", "thought": True}]}}
                    ]
                }
            ),
            "a",
            "b",
        ),
    ],
)
async def test_sse_streams_decode_to_their_text(stream, text, thinking):
    view = decode_body(stream, "text/event-stream")
    assert view["kind"] == "sse"
    assert view["assembled"] == {"text": text, "thinking": thinking}


async def test_node_detail_follows_the_credential_policy(
    datasette, manifest, capsem_home, cache_dir
):
    """node.json gives each value under its column's name, so carriers (a URL's query
    string) are hidden whole for a reader without view_secrets, as on every other page."""

    for session in clean_current(manifest):
        with ledger(capsem_home, session, cache_dir) as conn:
            row = conn.execute(
                "SELECT id, trace_id FROM net_events WHERE coalesce(query, '') != '' "
                "AND trace_id IS NOT NULL LIMIT 1"
            ).fetchone()
        if row is None:
            continue
        url = (
            trace_url(session["id"], row["trace_id"], "/node.json") + f"?id=net_events:{row['id']}"
        )
        detail = (await datasette.client.get(url)).json()
        assert detail["cells"]["query"] == redaction.HIDDEN
        return
    pytest.skip("no net row with a query string in the generated home")
