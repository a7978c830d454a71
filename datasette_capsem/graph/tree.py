"""The span tree of one trace: turn → model call → the tool calls it emitted → their
responses, with the HTTP exchange, security rows and bodies as children (`tree.json`).

The tree is a second reading of the identity graph (`build.py`), not a new one: its nodes are
the graph's nodes (same ids, same findings from the check engine, same placeholders for
missing rows), and each node hangs under the one graph edge that owns it. Rows the graph joins
to the trace by time only (DNS, files, processes, MCP, unmatched HTTP) hang under the model
call whose step they happened in (the graph's `group`), or under the trace. Model-call spans
carry the ledger's own figures: input, output, cache-read and thinking tokens
(`usage_details` keys `cache_read` and `thinking`) and `estimated_cost_usd`; the trace and its
turns carry their sums, so per-span figures add up to the trace's totals by construction, and
the tests compare them with the ledger and with the `token_totals` query. The spans on the
trace's critical path (`waterfall.critical_path`, where it is defined) carry `critical`.
"""

from __future__ import annotations

import json
from typing import Any

from datasette_capsem.graph.conversation import first_words
from datasette_capsem.graph.trace_rows import TraceRows
from datasette_capsem.graph.values import as_float, as_int
from datasette_capsem.graph.waterfall import critical_path
from datasette_capsem.ledger.tables import TABLES

TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "thinking_tokens")
# Edge type -> True when the edge's source is the parent of its target (else the reverse).
PARENT_EDGES: dict[str, bool] = {
    "contains": True,
    "emitted": True,
    "responded-in": True,
    "correlated": False,
    "event_id": True,
    "spawned": True,
    "owns": True,
}
# When a node could hang under several edges, the first of these wins.
EDGE_RANK = ("contains", "emitted", "responded-in", "correlated", "spawned", "event_id", "owns")
# A node type's kind in the tree (the type itself unless the registry says otherwise).
KIND_OF_TYPE = {t.node_type: t.kind for t in TABLES if t.node_type and t.kind != t.node_type}
# Keys a model-call span always has (null when the ledger does not say).
MODEL_KEYS = (*TOKEN_FIELDS, "cost_usd", "model", "provider", "stop_reason", "duration_ms")
CHILD_RANK = {t.node_type: t.child_rank for t in TABLES if t.node_type and t.child_rank != 3}
# Node types that can be on the critical path (waterfall.CRITICAL_KINDS, by graph type).
CRITICAL_TYPES = tuple(dict.fromkeys(t.node_type for t in TABLES if t.critical))
# Lanes of the timeline that can be toggled on the page: kind -> lane.
LANE_OF_KIND = {t.kind: t.timeline_lane for t in TABLES if t.timeline_lane}
# The toggleable lanes' names, in the order the page offers them (tree.json `timeline_lanes`).
TIMELINE_LANES = (
    ("net", "HTTP"),
    ("dns", "DNS"),
    ("file", "files"),
    ("process", "processes"),
    ("security", "security"),
    ("body", "bodies"),
    ("item", "model items"),
)
# A kind's short label on the page (tree.json `kinds`).
KIND_LABELS = {"trace": "trace", "turn": "turn"} | {
    t.kind: t.kind_label for t in TABLES if t.kind and t.kind_label
}


def usage_tokens(usage_details: Any) -> tuple[int | None, int | None]:
    """(cache_read, thinking) from a model call's `usage_details` JSON; None when absent."""
    if not isinstance(usage_details, str) or not usage_details.strip():
        return None, None
    try:
        details = json.loads(usage_details)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(details, dict):
        return None, None
    return as_int(details.get("cache_read")), as_int(details.get("thinking"))


def _name(node: dict[str, Any]) -> str:
    return node.get("label") or node.get("type") or ""


def _span(node: dict[str, Any]) -> dict[str, Any]:
    """A tree node from a graph node: kind, name, timing and findings."""
    kind = KIND_OF_TYPE.get(node["type"], node["type"])
    span = {
        "id": node["id"],
        "kind": kind,
        "type": node["type"],
        "name": _name(node),
        "t": node.get("t"),
        "duration_ms": node.get("duration_ms"),
        "findings": list(node.get("findings") or []),
        "children": [],
    }
    if node.get("detail"):
        span["detail"] = node["detail"]
    if node["type"] in ("trace", "turn") or not node.get("table"):
        span["href"] = node.get("href")  # a row's own links come with its detail
    for flag in ("missing", "external"):
        if node.get(flag):
            span[flag] = True
    if kind in LANE_OF_KIND:
        span["lane"] = LANE_OF_KIND[kind]
    return span


def _model_fields(span: dict[str, Any], row: dict[str, Any], tools: list[str]) -> None:
    """A model call's figures, and what it did: the tools it called (`tools`) or the first
    words of its reply (`response_preview`, free text: masked or hidden for a viewer)."""
    cache_read, thinking = usage_tokens(row.get("usage_details"))
    if tools:
        span["tools"] = tools
    elif row.get("text_content"):
        span["response_preview"] = first_words(row["text_content"])
    span.update(
        model=row.get("model"),
        provider=row.get("provider"),
        stop_reason=row.get("stop_reason"),
        status_code=row.get("status_code"),
        input_tokens=as_int(row.get("input_tokens")),
        output_tokens=as_int(row.get("output_tokens")),
        cache_read_tokens=cache_read,
        thinking_tokens=thinking,
        cost_usd=as_float(row.get("estimated_cost_usd")),
        name=str(row.get("model") or row.get("provider") or "model call"),
    )


def _parents(graph: dict[str, Any]) -> dict[str, str]:
    """child node id -> parent node id, one per child, by `EDGE_RANK`."""
    chosen: dict[str, tuple[int, str]] = {}
    for edge in graph["edges"]:
        forward = PARENT_EDGES.get(edge["type"])
        if forward is None or edge.get("cross_trace"):
            continue
        parent, child = (
            (edge["source"], edge["target"]) if forward else (edge["target"], edge["source"])
        )
        if parent == child:
            continue
        rank = EDGE_RANK.index(edge["type"])
        if child not in chosen or rank < chosen[child][0]:
            chosen[child] = (rank, parent)
    return {child: parent for child, (_, parent) in chosen.items()}


def _no_cycles(parents: dict[str, str]) -> dict[str, str]:
    """Drop the parent link of any node that would make a cycle (a broken ledger can)."""
    for start in list(parents):
        seen, node = {start}, parents.get(start)
        while node is not None:
            if node in seen:
                parents.pop(start, None)
                break
            seen.add(node)
            node = parents.get(node)
    return parents


def _totals(span: dict[str, Any]) -> dict[str, Any]:
    """Sum of the model calls at or under `span` (each counted once), and its time extent."""
    totals: dict[str, Any] = {f: 0 for f in TOKEN_FIELDS}
    totals.update(cost_usd=0.0, model_calls=0, tool_calls=0)
    start, end = None, None
    stack = [span]
    while stack:
        node = stack.pop()
        if node["type"] == "model_call" and not node.get("missing") and not node.get("external"):
            totals["model_calls"] += 1
            for field in TOKEN_FIELDS:
                totals[field] += node.get(field) or 0
            totals["cost_usd"] += node.get("cost_usd") or 0.0
        if node["type"] == "tool_call" and not node.get("missing"):
            totals["tool_calls"] += 1
        if node.get("t") is not None:
            begin = node["t"]
            finish = begin + (node.get("duration_ms") or 0.0)
            start = begin if start is None else min(start, begin)
            end = finish if end is None else max(end, finish)
        stack.extend(node["children"])
    totals["cost_usd"] = round(totals["cost_usd"], 6)
    totals["start"] = start
    totals["duration_ms"] = round(end - start, 3) if start is not None else None
    return totals


def _mark_critical(spans: dict[str, dict[str, Any]], graph: dict[str, Any]) -> list[str]:
    """Mark the spans on the trace's critical path (`waterfall.critical_path`); their ids."""
    timed = [
        (node["id"], spans[node["id"]]["t"], spans[node["id"]].get("duration_ms") or 0.0)
        for node in graph["nodes"]
        if node["type"] in CRITICAL_TYPES
        and spans[node["id"]].get("t") is not None
        and not node.get("missing")
        and not node.get("external")
    ]
    path = critical_path(timed)
    for span_id in path:
        spans[span_id]["critical"] = True
    return path


def _compact(span: dict[str, Any]) -> None:
    """Leave out what is empty (a 500-call tree has 8,000 spans): no children, no findings,
    no time, no figure. The page reads a missing key as empty."""
    stack = [span]
    while stack:
        node = stack.pop()
        stack.extend(node["children"])
        kept = MODEL_KEYS if node["type"] == "model_call" else ()
        for key in [k for k, v in node.items() if (v is None or v == [] or v == "")]:
            if key not in kept:
                del node[key]


def build_tree(rows: TraceRows, graph: dict[str, Any]) -> dict[str, Any]:
    """tree.json: the nested spans of a trace, with totals on the trace and each turn."""
    spans = {node["id"]: _span(node) for node in graph["nodes"]}
    model_rows = {f"model_calls:{r['id']}": r for r in rows.model_calls}
    model_rows.update(
        {f"model_calls:{k}": v for k, v in rows.outside_model_calls.items() if v is not None}
    )
    tools: dict[Any, list[str]] = {}
    for call in sorted(rows.tool_calls, key=lambda r: (as_int(r.get("call_index")) or 0, r["id"])):
        if call.get("tool_name") and call.get("model_call_id") is not None:
            tools.setdefault(call["model_call_id"], []).append(str(call["tool_name"]))
    for node_id, row in model_rows.items():
        if node_id in spans:
            _model_fields(spans[node_id], row, tools.get(row.get("id"), []))
    for node in graph["nodes"]:
        if node["type"] == "tool_response":
            spans[node["id"]]["name"] = node.get("label") or "tool response"
    parents = _no_cycles(_parents(graph))
    call_of_group = {
        node["group"]: node["id"]
        for node in graph["nodes"]
        if node["type"] == "model_call" and not node.get("external") and not node.get("missing")
    }
    consumed: dict[str, str] = {}
    for edge in graph["edges"]:
        if edge["type"] == "consumed-by":
            consumed[edge["source"]] = edge["target"]
    order = {node["id"]: index for index, node in enumerate(graph["nodes"])}
    for node in graph["nodes"]:
        node_id = node["id"]
        if node_id == "trace":
            continue
        parent = parents.get(node_id)
        if parent is None or parent not in spans:
            parent = call_of_group.get(node.get("group"), "trace")
            if parent == node_id:
                parent = "trace"
            spans[node_id]["during"] = parent != "trace"  # placed by time, not by a join
        if node_id in consumed:
            spans[node_id]["consumed_by"] = consumed[node_id]
        spans[parent]["children"].append(spans[node_id])
    for span in spans.values():
        span["children"].sort(
            key=lambda s: (
                CHILD_RANK.get(s["type"], 3),  # the row's own parts first, items last
                s["t"] if s["t"] is not None else float("inf"),
                order[s["id"]],
            )
        )
    path = _mark_critical(spans, graph)
    root = spans["trace"]
    root["name"] = rows.trace_id
    for span in spans.values():
        if span["type"] in ("trace", "turn"):
            span["totals"] = _totals(span)
            span["duration_ms"] = span["totals"]["duration_ms"]
            if span["type"] == "turn":
                span["t"] = span["totals"]["start"]
    _compact(root)
    findings = {
        f["kind"]: {k: f[k] for k in ("severity", "title", "count", "nodes")}
        for f in graph["findings"]
    }
    return {
        "trace_id": rows.trace_id,
        "ambient": graph.get("ambient"),
        "exchange": graph.get("exchange"),
        "totals": root["totals"],
        "root": root,
        "critical_path": path,
        "findings": findings,
        "node_count": len(spans),
        "kinds": KIND_LABELS,
        "timeline_lanes": [list(lane) for lane in TIMELINE_LANES],
    }


def flatten(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """Every span of a tree, depth first (for tests and exports)."""
    found, stack = [], [tree["root"]]
    while stack:
        span = stack.pop()
        found.append(span)
        stack.extend(reversed(span.get("children", [])))
    return found
