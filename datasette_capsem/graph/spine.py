"""The spine of a trace's graph: trace → turns → model calls → the tool calls they emitted →
the responses that answered them, and the model items that describe both (spec §6.1).

Edges: `contains` (trace → turn → model call), `emitted` (model call → tool call),
`responded-in` (tool call → tool response), `consumed-by` (tool response → the model call
that carried it), `owns` (model call → item) and `describes` (item → the tool call or
response it records). A model call of another trace is drawn `external`; one that exists
nowhere is a placeholder, and the edge to it is broken by the rule book's finding.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from datasette_capsem.graph.drawing import UNPAIRABLE, Drawing
from datasette_capsem.graph.labels import fmt_ms, short
from datasette_capsem.graph.values import as_float, as_int, text

# The rule book's verdicts on a tool call that no response answers in its trace.
UNANSWERED = ("tool_call_without_response", UNPAIRABLE)


def draw_spine(drawing: Drawing) -> None:
    _trace_and_turns(drawing)
    _model_calls(drawing)
    _tool_calls(drawing)
    _tool_responses(drawing)
    _unanswered_calls(drawing)
    _model_items(drawing)


def _trace_and_turns(drawing: Drawing) -> None:
    trace_id, links = drawing.rows.trace_id, drawing.links
    label = f"ambient trace {short(trace_id)}" if drawing.ambient else f"trace {short(trace_id)}"
    drawing.add_node(
        "trace",
        "trace",
        label,
        title=trace_id,
        row=links.table("model_calls", trace_id=trace_id),
        href=links.trace(trace_id),
        t=0.0 if drawing.groups.t0 is not None else None,
    )
    if drawing.ambient:  # each model call is an exchange of its own, under the trace
        return
    turns = dict.fromkeys(
        r.get("turn_id") for r in drawing.rows.model_calls if r.get("turn_id") is not None
    )
    for turn_id in turns:
        node_id = f"turn:{turn_id}"
        drawing.add_node(
            node_id,
            "turn",
            f"turn {short(turn_id)}",
            title=str(turn_id),
            row=links.table("model_calls", turn_id=turn_id),
            href=links.table("model_calls", turn_id=turn_id),
        )
        drawing.edge("trace", node_id, "contains")


def _model_calls(drawing: Drawing) -> None:
    for row in drawing.rows.model_calls:
        tokens = (as_int(row.get("input_tokens")) or 0) + (as_int(row.get("output_tokens")) or 0)
        label = f"{text(row.get('model') or row.get('provider'), 28)} · {text(row.get('stop_reason'), 16) or '—'}"
        node = drawing.row_node(
            "model_calls",
            row,
            label,
            detail=f"{tokens} tok · {fmt_ms(row.get('duration_ms'))}",
            group=drawing.groups.of_call[row["id"]],
            tokens=tokens,
            cost=as_float(row.get("estimated_cost_usd")),
            stop_reason=row.get("stop_reason"),
            status_code=row.get("status_code"),
        )
        turn = f"turn:{row.get('turn_id')}"
        drawing.edge(turn if turn in drawing.nodes else "trace", node["id"], "contains")


def _model_call_ref(drawing: Drawing, mc_id: Any, group: int) -> tuple[str, str]:
    """Node of a referenced model call: in trace, elsewhere (`external`) or missing."""
    if mc_id in drawing.groups.of_call:
        return f"model_calls:{mc_id}", "inside"
    outside = drawing.rows.outside_model_calls.get(mc_id)
    if outside is not None:
        node_id = f"model_calls:{mc_id}"
        if node_id not in drawing.nodes:
            label = f"model call #{mc_id} (trace {short(outside.get('trace_id'))})"
            drawing.row_node("model_calls", outside, label, group=group, external=True)
            drawing.nodes[node_id]["t"] = None
        return node_id, "outside"
    label = f"model call #{text(mc_id, 20)} — missing"
    return drawing.placeholder(f"model_calls:{mc_id}", "model_call", label, group), "missing"


def _from_model_call(
    drawing: Drawing, node_id: str, mc_id: Any, group: int, edge_type: str, kind: str
) -> None:
    """The edge from the model call that emitted or owns a row (broken by finding `kind`)."""
    parent, where = _model_call_ref(drawing, mc_id, group)
    if where == "outside":
        drawing.edge(parent, node_id, edge_type, cross_trace=True)
    else:
        drawing.relation(node_id, parent, node_id, edge_type, kind)


def _tool_calls(drawing: Drawing) -> None:
    for row in drawing.rows.tool_calls:
        mc_id = row.get("model_call_id")
        group = drawing.groups.of_row(row, mc_id)
        detail = " · ".join(text(v, 16) for v in (row.get("origin"), row.get("decision")) if v)
        node = drawing.row_node(
            "tool_calls",
            row,
            text(row.get("tool_name"), 32) or "tool call",
            detail=detail,
            group=group,
            call_id=text(row.get("call_id"), 80),
            origin=row.get("origin"),
        )
        if mc_id is None:
            continue  # an MCP call seen on the wire: no model call emitted it
        _from_model_call(drawing, node["id"], mc_id, group, "emitted", "tool_call_parent_missing")


def _matching_call(
    calls_by_id: dict[Any, list[dict]], has_trace: bool, response: dict[str, Any]
) -> dict[str, Any] | None:
    """The tool call a response answers: same call_id, same trace (spec §6.2 check 3)."""
    candidates = [
        c
        for c in calls_by_id.get(response.get("call_id"), [])
        if not has_trace or c.get("trace_id") == response.get("trace_id")
    ]
    if not candidates:
        return None
    consumer = as_int(response.get("model_call_id"))
    earlier = [c for c in candidates if (as_int(c.get("model_call_id")) or 0) < (consumer or 0)]
    return (earlier or candidates)[-1]


def _tool_responses(drawing: Drawing) -> None:
    rows, schema = drawing.rows, drawing.rows.schema
    calls_by_id: dict[Any, list[dict]] = defaultdict(list)
    for call in rows.tool_calls:
        calls_by_id[call.get("call_id")].append(call)
    has_trace = schema.has("tool_calls", "trace_id") and schema.has("tool_responses", "trace_id")
    for row in rows.tool_responses:
        call = _matching_call(calls_by_id, has_trace, row)
        mc_id = row.get("model_call_id")
        group = drawing.groups.of_call.get(mc_id) or (
            drawing.nodes[f"tool_calls:{call['id']}"]["group"] if call else drawing.groups.at(None)
        )
        node = drawing.row_node(
            "tool_responses",
            row,
            f"response {short(row.get('call_id'), 12)}",
            detail="error" if row.get("is_error") else "",
            group=group,
            call_id=text(row.get("call_id"), 80),
        )
        _link_response_to_call(drawing, node["id"], row, call, group)
        _link_response_to_consumer(drawing, node["id"], mc_id, group)


def _link_response_to_call(
    drawing: Drawing, node_id: str, row: dict, call: dict | None, group: int
) -> None:
    pair = drawing.rows.paired_elsewhere.get(row.get("id"))
    if call is None and pair is not None:  # the writer put the result away from its call
        call_node = _elsewhere_node(
            drawing,
            "tool_calls",
            pair["call_row"],
            pair["call_trace_id"],
            f"tool call #{pair['call_row']}",
            group,
            event_id=pair.get("call_event_id"),
            why=pair["reason"],
        )
        drawing.relation(
            node_id,
            call_node,
            node_id,
            "responded-in",
            "result_in_another_trace",
            cross_trace=True,
            why=pair["reason"],
        )
        return
    if call is None:
        label = f"tool call {short(row.get('call_id'), 12)} — missing"
        missing = drawing.placeholder(
            f"tool_calls:call_id:{row.get('call_id')}", "tool_call", label, group
        )
        drawing.relation(node_id, missing, node_id, "responded-in", "orphan_tool_response")
        return
    call_node = f"tool_calls:{call['id']}"
    drawing.relation(node_id, call_node, node_id, "responded-in", "response_before_call")


def _elsewhere_node(
    drawing: Drawing, table: str, row_id: Any, trace_id: Any, label: str, group: int, **fields: Any
) -> str:
    """The node of a row of another trace that pairs with a row of this one (spec §4.4)."""
    node_id = f"{table}:{row_id}"
    if node_id not in drawing.nodes:
        row = {"id": row_id, "trace_id": trace_id, "event_id": fields.pop("event_id", None)}
        label = f"{label} (trace {short(trace_id)})"
        drawing.row_node(
            table,
            row,
            label,
            group=group,
            external=True,
            trace_id=trace_id,
            trace_href=drawing.links.trace(str(trace_id)),
            **fields,
        )
        drawing.nodes[node_id]["t"] = None
    return node_id


def _link_response_to_consumer(drawing: Drawing, node_id: str, mc_id: Any, group: int) -> None:
    consumer, where = _model_call_ref(drawing, mc_id, group)
    if where == "outside":
        drawing.edge(node_id, consumer, "consumed-by", cross_trace=True)
    else:
        kind = "tool_response_parent_missing"
        drawing.relation(node_id, node_id, consumer, "consumed-by", kind)


def _unanswered_calls(drawing: Drawing) -> None:
    """The response side of each tool call no response answers in this trace, as the rule book
    decided it (spec §6.2 #6, §4.4), never by a rule of its own: answered in another trace (the
    rule book's pairing, `answered_elsewhere`), each answer is drawn across; never answered
    (`tool_call_without_response`) or answered under an id Capsem's writer can never match
    (`unpairable_tool_ids`), a placeholder response, its edge marked by that verdict."""
    for row in drawing.rows.tool_calls:
        node_id = f"tool_calls:{row['id']}"
        answers = drawing.rows.answered_elsewhere.get(row["id"])
        if answers:  # answered in a later trace (spec §4.4): each answer drawn, none broken
            for pair in answers:
                answer = _elsewhere_node(
                    drawing,
                    "tool_responses",
                    pair["id"],
                    pair["trace_id"],
                    f"response {short(pair.get('call_id'), 12)}",
                    drawing.nodes[node_id]["group"],
                    why=pair["reason"],
                )
                drawing.edge(node_id, answer, "responded-in", cross_trace=True, why=pair["reason"])
            continue
        if not any(drawing.verdicts.has("tool_calls", row["id"], kind) for kind in UNANSWERED):
            continue
        missing = drawing.placeholder(
            f"tool_responses:call_id:{row.get('call_id')}",
            "tool_response",
            "no response",
            drawing.nodes[node_id]["group"],
        )
        drawing.relation(node_id, node_id, missing, "responded-in", "tool_call_without_response")


def _model_items(drawing: Drawing) -> None:
    rows = drawing.rows
    calls = {(c.get("call_id"), c.get("model_call_id")): c for c in rows.tool_calls}
    responses = defaultdict(list)
    for response in rows.tool_responses:
        responses[response.get("call_id")].append(response)
    for row in rows.model_items:
        mc_id = row.get("model_call_id")
        group = drawing.groups.of_row(row, mc_id)
        label = f"{text(row.get('item_index'), 6)}. {text(row.get('kind'), 16)}"
        if row.get("tool_name"):
            label += f" {text(row.get('tool_name'), 20)}"
        node = drawing.row_node(
            "model_items",
            row,
            label,
            group=group,
            kind=row.get("kind"),
            order=as_int(row.get("item_index")),
        )
        _from_model_call(drawing, node["id"], mc_id, group, "owns", "orphan_model_item")
        _link_item(drawing, node["id"], row, calls, responses, group)


def _link_item(
    drawing: Drawing, node_id: str, row: dict, calls: dict, responses: dict, group: int
) -> None:
    call_id = row.get("call_id")
    if row.get("kind") == "tool_call":
        call = calls.get((call_id, row.get("model_call_id")))
        if call is not None:
            drawing.edge(node_id, f"tool_calls:{call['id']}", "describes")
            return
        label = f"tool call {short(call_id, 12)} — missing"
        missing = drawing.placeholder(f"tool_calls:call_id:{call_id}", "tool_call", label, group)
        drawing.relation(node_id, node_id, missing, "describes", "orphan_model_item")
    elif row.get("kind") == "tool_response":
        found = responses.get(call_id)
        if found:
            same_call = [r for r in found if r.get("model_call_id") == row.get("model_call_id")]
            drawing.edge(node_id, f"tool_responses:{(same_call or found)[-1]['id']}", "describes")
        elif call_id not in drawing.rows.present_response_call_ids:
            label = f"tool response {short(call_id, 12)} — missing"
            missing = drawing.placeholder(
                f"tool_responses:call_id:{call_id}", "tool_response", label, group
            )
            drawing.relation(node_id, node_id, missing, "describes", "orphan_model_item")
