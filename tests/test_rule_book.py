"""One rule book: the trace graph shows exactly the check engine's findings for its rows.

For every trace of every generated session, the findings drawn on graph.json's row nodes must
equal the integrity report's findings (all offending rows, not a sample) restricted to the rows
the graph holds. The report is computed here with the engine directly; the graph is served over
HTTP by the plugin.
"""

from __future__ import annotations

import sqlite3

import pytest

from datasette_capsem.catalog.catalog import Catalog
from datasette_capsem.checks import check_session
from datasette_capsem.config import load_settings
from datasette_capsem.readonly import open_readonly
from tests.trace_support import trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")

TRACED_TABLES = ("model_calls", "tool_calls", "tool_responses", "net_events", "model_items")


def _traces(conn: sqlite3.Connection) -> list[str]:
    found: set[str] = set()
    for table in TRACED_TABLES:
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if "trace_id" in columns:
            found |= {
                row[0]
                for row in conn.execute(f"SELECT DISTINCT trace_id FROM {table}")
                if isinstance(row[0], str) and row[0]
            }
    return sorted(found)


def _report_findings(report) -> dict[str, set[str]]:
    """node id ("table:row id") -> finding kinds, from every offending row of the report."""
    by_node: dict[str, set[str]] = {}
    for finding in report.findings:
        if finding.applicable and finding.table:
            for row_id in finding.offending:
                by_node.setdefault(f"{finding.table}:{row_id}", set()).add(finding.kind)
    return by_node


async def test_graph_findings_equal_the_report_restricted_to_each_trace(
    operator_datasette, capsem_home, manifest, tmp_path
):
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(tmp_path)})
    catalog = Catalog(settings)
    compared_traces, compared_findings, missing_responses = 0, 0, 0
    for entry in manifest["sessions"]:
        session = catalog.get(entry["id"])
        if session is None or session.ledger_path is None or entry.get("broken"):
            continue
        try:
            conn = open_readonly(session.ledger_path, tmp_path)
        except Exception:  # noqa: BLE001 - damaged files have no traces to compare
            continue
        try:
            report = check_session(conn, session=session, live=session.live)
            traces = _traces(conn)
        finally:
            conn.close()
        expected_all = _report_findings(report)
        for trace_id in traces:
            response = await operator_datasette.client.get(
                trace_url(session.id, trace_id, "/graph.json")
            )
            assert response.status_code == 200, (session.id, trace_id)
            graph = response.json()
            rows = {
                n["id"]
                for n in graph["nodes"]
                if n.get("table") and not n.get("missing") and not n.get("external")
            }
            shown = {(kind["kind"], node) for kind in graph["findings"] for node in kind["nodes"]}
            expected = {(kind, node) for node in rows for kind in expected_all.get(node, ())}
            assert shown == expected, (session.id, trace_id)
            missing_responses += _assert_edges_follow_findings(graph, expected)
            compared_traces += 1
            compared_findings += len(expected)
    # The comparison covered real traces and real findings (it could fail).
    assert compared_traces >= 50
    assert compared_findings >= 10
    assert missing_responses >= 1


UNANSWERED_VERDICTS = ("tool_call_without_response", "unpairable_tool_ids")
EDGE_KINDS = {
    "orphan_tool_response",
    "response_before_call",
    "tool_response_parent_missing",
    "tool_call_parent_missing",
    "tool_call_without_response",
    "orphan_model_item",
    "audit_exec_missing",
    "orphan_body_blob",
}


def _assert_edges_follow_findings(graph: dict, expected: set[tuple[str, str]]) -> int:
    """A broken edge carries a finding of one of its ends; a link finding has its broken edge;
    a missing response is drawn only where the rule book says so. How many were drawn."""
    broken = [e for e in graph["edges"] if e["broken"]]
    for edge in broken:
        assert {(edge["finding"], edge["source"]), (edge["finding"], edge["target"])} & expected
    drawn = {(e["finding"], end) for e in broken for end in (e["source"], e["target"])}
    for kind, node in expected:
        if kind in EDGE_KINDS:
            assert (kind, node) in drawn, (kind, node)
    # A response drawn missing is the rule book's verdict on its call, never the graph's rule.
    nodes = {n["id"]: n for n in graph["nodes"]}
    missing = 0
    for edge in graph["edges"]:
        if edge["type"] == "responded-in" and nodes[edge["target"]].get("missing"):
            verdicts = {(kind, edge["source"]) for kind in UNANSWERED_VERDICTS}
            assert verdicts & expected, edge
            missing += 1
    return missing
