"""The identity graph and the waterfall of a trace, checked against the ledger: clean traces,
every injected defect, every era, hostile values and bad input."""

from __future__ import annotations

import json
import sqlite3

import pytest

from datasette_capsem.graph.timeparse import parse_ms
from tests.trace_support import (
    clean_current,
    defect_sessions,
    hostile_session,
    ledger,
    of_era,
    trace_url,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Defects the graph marks on the row they were injected into.
ROW_DEFECTS = (
    "tool_call_parent_missing",
    "orphan_tool_response",
    "tool_response_parent_missing",
    "response_before_call",
    "tool_call_without_response",
    "orphan_model_item",
    "unledgered_mcp_call",
    "orphan_body_blob",
    "blob_size_mismatch",
    "blob_hash_mismatch",
    "dangling_security_event",
    "ask_lifecycle",
    "ask_pending",
    "ai_traffic_unparsed",
    "model_call_quality",
    "stop_reason_mismatch",
    "exec_incomplete",
    "audit_exec_missing",
    "bad_timestamp",
    "turn_trace_mismatch",
    "duplicate_event_id",
    "bad_event_id",
)
# Defects that are a link that does not resolve: drawn as a broken edge.
BROKEN_LINKS = (
    "tool_call_parent_missing",
    "orphan_tool_response",
    "tool_response_parent_missing",
    "response_before_call",
    "tool_call_without_response",
    "orphan_model_item",
    "unledgered_mcp_call",
    "orphan_body_blob",
    "dangling_security_event",
    "audit_exec_missing",
)
SECURITY_TABLES = ("security_rule_events", "security_decision_events", "security_ask_events")
PRIMARY = (
    "model_calls",
    "tool_calls",
    "model_items",
    "net_events",
    "dns_events",
    "fs_events",
    "exec_events",
    "audit_events",
    "substitution_events",
)


def ids(conn: sqlite3.Connection, sql: str, params) -> set[str]:
    return {f"{row[0]}:{row[1]}" for row in conn.execute(sql, params)}


def expected_nodes(conn: sqlite3.Connection, trace: str) -> dict[str, set[str]]:
    """Node ids by type, from the ledger, the way spec §6.1 joins them."""
    calls = "(SELECT id FROM model_calls WHERE trace_id = :t)"
    child = "SELECT '{0}', id FROM {0} WHERE trace_id = :t OR model_call_id IN " + calls
    found = {
        "model_call": ids(
            conn, "SELECT 'model_calls', id FROM model_calls WHERE trace_id = :t", {"t": trace}
        ),
        "tool_call": ids(conn, child.format("tool_calls"), {"t": trace}),
        "tool_response": ids(conn, child.format("tool_responses"), {"t": trace}),
        "model_item": ids(conn, child.format("model_items"), {"t": trace}),
    }
    event_ids = set()
    for table in PRIMARY:
        rows = (
            conn.execute(
                f"SELECT event_id FROM {table} WHERE trace_id = :t "
                f"OR ({table!r} IN ('tool_calls', 'model_items') AND model_call_id IN {calls})",
                {"t": trace},
            ).fetchall()
            if table in ("tool_calls", "model_items")
            else conn.execute(
                f"SELECT event_id FROM {table} WHERE trace_id = :t", {"t": trace}
            ).fetchall()
        )
        event_ids |= {r[0] for r in rows if r[0]}
    marks = ",".join("?" * len(event_ids))
    params = [*event_ids, trace]
    found["security_event"] = set()
    for table in SECURITY_TABLES:
        found["security_event"] |= ids(
            conn,
            f"SELECT '{table}', id FROM {table} WHERE event_id IN ({marks}) OR trace_id = ?",
            params,
        )
    found["body"] = ids(
        conn,
        f"SELECT 'event_body_blobs', id FROM event_body_blobs WHERE event_id IN ({marks}) "
        "OR trace_id = ?",
        params,
    )
    return found


def nodes_of(graph: dict, node_type: str) -> set[str]:
    return {
        n["id"]
        for n in graph["nodes"]
        if n["type"] == node_type and not n.get("missing") and not n.get("external")
    }


async def test_clean_graphs_match_the_ledger(datasette, manifest, capsem_home, cache_dir):
    for session in clean_current(manifest)[:3]:
        with ledger(capsem_home, session, cache_dir) as conn:
            for trace in session["traces"]:
                graph = (
                    await datasette.client.get(trace_url(session["id"], trace, "/graph.json"))
                ).json()
                for node_type, wanted in expected_nodes(conn, trace).items():
                    assert nodes_of(graph, node_type) == wanted, (node_type, session["id"], trace)
                assert [f for f in graph["findings"] if f["severity"] != "info"] == []
                assert not any(e["broken"] for e in graph["edges"])
                check_edges(conn, graph)
                check_rows(graph, session["id"])


def check_edges(conn: sqlite3.Connection, graph: dict) -> None:
    """Every edge joins existing nodes, and emitted/consumed-by/responded-in follow the ledger."""
    nodes = {n["id"]: n for n in graph["nodes"]}
    for edge in graph["edges"]:
        assert edge["source"] in nodes and edge["target"] in nodes, edge
    by_type: dict[str, set[tuple[str, str]]] = {}
    for edge in graph["edges"]:
        by_type.setdefault(edge["type"], set()).add((edge["source"], edge["target"]))
    tools = [n for n in nodes.values() if n["type"] == "tool_call" and not n.get("missing")]
    for tool in tools:
        parent = conn.execute(
            "SELECT model_call_id FROM tool_calls WHERE id = ?", [tool["row_id"]]
        ).fetchone()[0]
        if parent is not None:
            assert (f"model_calls:{parent}", tool["id"]) in by_type["emitted"]
    for response in [n for n in nodes.values() if n["type"] == "tool_response"]:
        row = conn.execute(
            "SELECT model_call_id, call_id FROM tool_responses WHERE id = ?", [response["row_id"]]
        ).fetchone()
        assert (response["id"], f"model_calls:{row[0]}") in by_type["consumed-by"]
        sources = [s for s, t in by_type["responded-in"] if t == response["id"]]
        assert len(sources) == 1
        if nodes[sources[0]].get("missing"):  # a result Capsem could not pair (Ollama): a habit
            assert "unpairable_tool_ids" in response["findings"], response
        else:
            assert nodes[sources[0]]["call_id"] == row[1]
    for source, target in by_type.get("event_id", ()):
        assert nodes[source]["event_id"] == nodes[target]["event_id"]


def check_rows(graph: dict, session_id: str) -> None:
    """Every ledger node links to its Datasette row."""
    for node in graph["nodes"]:
        if node.get("table") and not node.get("missing"):
            assert node["row"] == f"/{session_id}/{node['table']}/{node['row_id']}"
            assert node["href"].startswith("/")


def defect_trace(conn: sqlite3.Connection, table: str, row_id: int) -> str | None:
    """The trace whose graph should show a row: its trace_id, or its event's row's."""
    row = conn.execute(f"SELECT * FROM {table} WHERE id = ?", [row_id]).fetchone()
    if row is None:
        return None
    keys = row.keys()
    if "model_call_id" in keys and table != "tool_calls" and row["model_call_id"] is not None:
        found = conn.execute(
            "SELECT trace_id FROM model_calls WHERE id = ?", [row["model_call_id"]]
        ).fetchone()
        if found and found[0]:
            return found[0]
    if "trace_id" in keys and row["trace_id"]:
        return row["trace_id"]
    for primary in PRIMARY:
        found = conn.execute(
            f"SELECT trace_id FROM {primary} WHERE event_id = ? AND trace_id IS NOT NULL",
            [row["event_id"]],
        ).fetchone()
        if found:
            return found[0]
    return None


@pytest.mark.parametrize("kind", ROW_DEFECTS)
async def test_each_injected_defect_is_drawn_on_its_row(
    datasette, manifest, capsem_home, cache_dir, kind
):
    cases = defect_sessions(manifest, kind)
    assert cases, f"the generator injects {kind}"
    shown = 0
    for session, defect in cases:
        with ledger(capsem_home, session, cache_dir) as conn:
            trace = defect_trace(conn, defect["table"], defect["row_id"])
        if trace is None:
            continue
        graph = (await datasette.client.get(trace_url(session["id"], trace, "/graph.json"))).json()
        findings = {f["kind"]: f for f in graph["findings"]}
        assert kind in findings, (kind, session["id"], trace, sorted(findings))
        node_id = f"{defect['table']}:{defect['row_id']}"
        assert node_id in findings[kind]["nodes"], (kind, node_id, findings[kind]["nodes"])
        if kind in BROKEN_LINKS:
            # An MCP rule row with no tool call is both unledgered (the edge) and dangling.
            same = ("unledgered_mcp_call", kind) if kind == "dangling_security_event" else (kind,)
            broken = [e for e in graph["edges"] if e["broken"] and e["finding"] in same]
            assert any(node_id in (e["source"], e["target"]) for e in broken), kind
            assert all(e["title"] for e in broken)
        page = (await datasette.client.get(trace_url(session["id"], trace))).text
        assert findings[kind]["title"] in page
        shown += 1
    assert shown, f"no {kind} defect could be placed in a trace"


async def test_waterfall_rows_and_times_match_the_ledger(
    datasette, manifest, capsem_home, cache_dir
):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    data = (await datasette.client.get(trace_url(session["id"], trace, ".json"))).json()
    graph, waterfall = data["graph"], data["waterfall"]
    timed = {
        (n["table"], n["row_id"])
        for n in graph["nodes"]
        if n.get("table")
        and n["type"] not in ("model_item", "tool_response", "body")
        and not n.get("missing")
        and not n.get("external")
    }
    assert {(r["table"], r["row_id"]) for r in waterfall["rows"]} == timed
    starts = [r["start_ms"] for r in waterfall["rows"]]
    assert starts == sorted(starts)
    assert waterfall["rows"][0]["offset_ms"] == 0
    kinds = {r["kind"] for r in waterfall["rows"]}
    assert {"model", "tool", "net", "security"} <= kinds
    with ledger(capsem_home, session, cache_dir) as conn:
        for bar in waterfall["rows"]:
            if bar["table"] in SECURITY_TABLES:
                row = conn.execute(
                    f"SELECT timestamp_unix_ms FROM {bar['table']} WHERE id = ?", [bar["row_id"]]
                ).fetchone()
                assert bar["start_ms"] == row[0]
                continue
            row = conn.execute(
                f"SELECT * FROM {bar['table']} WHERE id = ?", [bar["row_id"]]
            ).fetchone()
            assert bar["start_ms"] == pytest.approx(parse_ms(row["timestamp"]), abs=0.001)
            assert bar["offset_ms"] == pytest.approx(bar["start_ms"] - starts[0], abs=0.01)
            column = {"dns_events": "upstream_resolver_ms"}.get(bar["table"], "duration_ms")
            names = list(row.keys())  # sqlite3.Row: `in` would test values
            if column in names and row[column] is not None:
                assert bar["duration_ms"] == row[column]
            assert bar["row"] == f"/{session['id']}/{bar['table']}/{bar['row_id']}"
    html = (await datasette.client.get(trace_url(session["id"], trace))).text
    # The page is a skeleton: the timeline is drawn from tree.json, nested like the tree.
    assert 'data-tree-url="' + trace_url(session["id"], trace, "/tree.json") + '"' in html
    # The picture is drawn from picture.json (what it draws of graph.json).
    assert 'data-graph-url="' + trace_url(session["id"], trace, "/picture.json") + '"' in html


async def test_summary_totals(datasette, manifest, capsem_home, cache_dir):
    session = clean_current(manifest)[1]
    trace = session["traces"][-1]
    data = (await datasette.client.get(trace_url(session["id"], trace, ".json"))).json()
    with ledger(capsem_home, session, cache_dir) as conn:
        row = conn.execute(
            "SELECT count(*), sum(input_tokens), sum(output_tokens), sum(estimated_cost_usd) "
            "FROM model_calls WHERE trace_id = ?",
            [trace],
        ).fetchone()
    summary = data["trace"]
    assert (summary["model_calls"], summary["input_tokens"], summary["output_tokens"]) == tuple(
        row
    )[:3]
    assert summary["cost_usd"] == pytest.approx(row[3], abs=1e-6)


@pytest.mark.parametrize("era", ["0.16", "1.1", "migrated"])
async def test_older_eras_draw_what_they_hold(datasette, manifest, capsem_home, cache_dir, era):
    sessions = [s for s in of_era(manifest, era) if s.get("traces")]
    assert sessions, f"the generator writes {era} sessions with traces"
    for session in sessions:
        with ledger(capsem_home, session, cache_dir) as conn:
            for trace in session["traces"]:
                response = await datasette.client.get(
                    trace_url(session["id"], trace, "/graph.json")
                )
                assert response.status_code == 200, response.text[:300]
                graph = response.json()
                wanted = expected_nodes_any_era(conn, trace)
                assert nodes_of(graph, "model_call") == wanted["model_call"]
                assert nodes_of(graph, "tool_call") >= wanted["tool_call"]
                html = await datasette.client.get(trace_url(session["id"], trace))
                assert html.status_code == 200
                if era == "0.16":
                    assert not nodes_of(graph, "security_event")
                    assert any("event ids" in note for note in graph["notes"])


def expected_nodes_any_era(conn: sqlite3.Connection, trace: str) -> dict[str, set[str]]:
    calls = ids(conn, "SELECT 'model_calls', id FROM model_calls WHERE trace_id = ?", [trace])
    tools = ids(
        conn,
        "SELECT 'tool_calls', id FROM tool_calls WHERE model_call_id IN "
        "(SELECT id FROM model_calls WHERE trace_id = ?)",
        [trace],
    )
    return {"model_call": calls, "tool_call": tools}


async def test_hostile_values_stay_bounded_and_escaped(datasette, manifest):
    session = hostile_session(manifest)
    for trace in session["traces"]:
        graph = (await datasette.client.get(trace_url(session["id"], trace, "/graph.json"))).json()
        for node in graph["nodes"]:
            assert len(node["label"]) <= 100, node["label"][:120]
        html = (await datasette.client.get(trace_url(session["id"], trace))).text
        assert "<script>window.__pwned" not in html
        assert "<img src=x" not in html


# What the page's script draws of a node and of an edge (picture.json keeps only these).
PICTURE_NODE = {
    "id",
    "type",
    "lane",
    "group",
    "label",
    "detail",
    "title",
    "findings",
    "missing",
    "external",
    "href",
}
PICTURE_EDGE = {"source", "target", "type", "broken", "severity", "title", "cross_trace"}


def drawn(item: dict, keys: set[str], always: set[str]) -> dict:
    """`item` with only `keys`, empty values (None, False, "", []) left out but `always`."""
    return {
        k: v
        for k, v in item.items()
        if k in keys and (k in always or not (v is None or v is False or v == "" or v == []))
    }


async def test_the_picture_is_the_graph_as_drawn(datasette, manifest):
    sessions = [clean_current(manifest)[0], hostile_session(manifest)]
    sessions += [s for s, _ in defect_sessions(manifest, "orphan_tool_response")[:1]]
    for session in sessions:
        for trace in session["traces"][:2]:
            graph = (
                await datasette.client.get(trace_url(session["id"], trace, "/graph.json"))
            ).json()
            answer = await datasette.client.get(trace_url(session["id"], trace, "/picture.json"))
            assert answer.status_code == 200
            picture = answer.json()
            assert {k: v for k, v in picture.items() if k not in ("nodes", "edges")} == {
                k: v for k, v in graph.items() if k not in ("nodes", "edges")
            }
            always = {"id", "type", "lane", "group", "label"}
            assert picture["nodes"] == [drawn(n, PICTURE_NODE, always) for n in graph["nodes"]]
            edges = [drawn(e, PICTURE_EDGE, {"source", "target", "type"}) for e in graph["edges"]]
            assert picture["edges"] == edges
            assert len(answer.content) < len(json.dumps(graph))


@pytest.mark.parametrize(
    "trace, status",
    [("no-such-trace", 404), ("t" * 300, 400), ("a%00b", 400), ("..%2F..%2Fetc", 404)],
)
async def test_bad_trace_ids_get_a_clear_4xx(datasette, manifest, trace, status):
    session = clean_current(manifest)[0]
    for suffix in ("", ".json", "/graph.json", ".otlp.json"):
        response = await datasette.client.get(
            f"/-/capsem/sessions/{session['id']}/traces/{trace}{suffix}"
        )
        assert response.status_code == status, (suffix, response.text[:200])


async def test_trace_pages_of_sessions_without_a_readable_ledger(datasette, manifest):
    for session in manifest["sessions"]:
        if not session.get("ledger"):
            response = await datasette.client.get(trace_url(session["id"], "any"))
            assert response.status_code == 404
        elif session.get("broken") in ("zero_bytes", "truncated", "not_sqlite"):
            response = await datasette.client.get(trace_url(session["id"], "any"))
            assert response.status_code == 422
