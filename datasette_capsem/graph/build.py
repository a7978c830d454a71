"""graph.json: the identity graph of one trace (spec §6.1), with its broken links drawn as such.

Nodes are ledger rows (plus the trace and its turns); edges are the joins the spec names. The
work is shared out by job: `drawing.py` holds the nodes, edges and findings and the rule that
ties each to the rule book's verdicts; `groups.py` places rows in columns and time;
`spine.py` draws trace → turn → model call → tool call → response and the items;
`attach.py` hangs the rows joined by trace id, event id or time; `labels.py` writes the text.
This module runs them in order and assembles the document the page's script lays out.
"""

from __future__ import annotations

from typing import Any

from datasette_capsem.checks.model import NO_VERDICTS, RowVerdicts
from datasette_capsem.findings import Severity
from datasette_capsem.graph.attach import draw_attached
from datasette_capsem.graph.drawing import LANE_INFO, LANES, Drawing
from datasette_capsem.graph.spine import draw_spine
from datasette_capsem.graph.trace_rows import TraceRows
from datasette_capsem.graph.values import as_int
from datasette_capsem.urls import SessionUrls

# Collapse hints for the page script: beyond `threshold` groups, keep `keep` at each end.
COLLAPSE = {"threshold": 12, "keep": 4, "chunk": 100}


def build_graph(
    rows: TraceRows, links: SessionUrls, verdicts: RowVerdicts = NO_VERDICTS
) -> dict[str, Any]:
    """graph.json for one trace: nodes, edges, findings, groups and layout hints."""
    drawing = Drawing(rows, links, verdicts)
    draw_spine(drawing)  # the spine first: the attached rows hang on its nodes
    draw_attached(drawing)
    nodes = sorted(drawing.nodes.values(), key=_node_order)
    findings = sorted(
        drawing.findings.values(), key=lambda f: (Severity.rank(f["severity"]), f["kind"])
    )
    return {
        "trace_id": rows.trace_id,
        "ambient": drawing.ambient,
        "exchange": rows.exchange,
        "nodes": nodes,
        "edges": drawing.edges,
        "findings": findings,
        "groups": _group_summaries(drawing, nodes),
        "lanes": list(LANES),
        "lane_info": [{"lane": lane, "name": name, "slot": slot} for lane, name, slot in LANE_INFO],
        # What one column (group) of the drawing holds: a model call and what it owns, or,
        # in a trace with no model call, one row.
        "group_unit": "model call" if rows.model_calls else "row",
        "collapse": COLLAPSE,
        "notes": list(rows.notes),
    }


def _node_order(node: dict[str, Any]) -> tuple:
    """Column, lane, time, item order, row id: the order the page lays nodes out in."""
    return (
        node["group"],
        LANES.index(node["lane"]),
        node.get("t") or 0.0,
        as_int(node.get("order")) or 0,
        node["row_id"] if isinstance(node.get("row_id"), int) else 0,
        node["id"],
    )


def _group_summaries(drawing: Drawing, nodes: list[dict]) -> list[dict[str, Any]]:
    groups: dict[int, dict[str, Any]] = {}
    for node in nodes:
        group = groups.setdefault(
            node["group"],
            {"index": node["group"], "nodes": 0, "tokens": 0, "broken": False, "label": ""},
        )
        group["nodes"] += 1
        group["tokens"] += node.get("tokens") or 0
        serious = [
            k for k in node["findings"] if drawing.findings[k]["severity"] in ("error", "warning")
        ]
        if serious or node.get("missing"):
            group["broken"] = True
        if node["type"] == "model_call" and not group["label"] and not node.get("external"):
            group["label"] = node["label"]
    return [groups[i] for i in sorted(groups)]
