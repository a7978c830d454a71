"""The identity graph of one trace (spec §6.1), with its broken links drawn as such.

Nodes are ledger rows (plus the trace and its turns); edges are the joins the spec names:
`contains` (trace → turn → model call), `owns` (model call → item), `emitted` (model call →
tool call), `responded-in` (tool call → tool response), `consumed-by` (tool response → the
model call that carried it), `event_id` (row → its security rows and bodies), `correlated`
(the HTTP row of a model exchange → its model call, by trace, method, path and time, §4.4),
`describes` (item → the tool call or response it records) and `spawned` (exec → audit).

The graph decides no rule of its own: each row node carries the findings the check engine (the
one rule book) reported for that row (`RowVerdicts`), and an edge is drawn `broken`, with the
finding's kind, title and severity, when the row it belongs to carries the matching finding. A
link that should exist and does not becomes a placeholder node (`missing: true`), so the picture
and the integrity report always agree. Each node also carries a `group` (the model call it
belongs to, in time order; 0 holds the trace) and a `lane`, which the page's script uses to lay
the graph out left to right and to collapse long traces.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from datasette_capsem.checks.model import NO_VERDICTS, RowVerdicts
from datasette_capsem.findings import Severity
from datasette_capsem.graph.exchanges import correlate_net, is_ambient
from datasette_capsem.graph.trace_rows import EVENT_TYPE_TABLES, TraceRows, row_start_ms
from datasette_capsem.graph.values import as_float, as_int, text, usable_event_id
from datasette_capsem.urls import SessionUrls

LANES = (
    "trace", "net", "model_call", "model_item", "tool_call", "tool_response", "body",
    "security_event", "host", "ambient",
)  # fmt: skip
NODE_TYPES = {
    "net_events": "net_event",
    "dns_events": "dns_event",
    "fs_events": "fs_event",
    "exec_events": "exec_event",
    "audit_events": "audit_event",
    "substitution_events": "substitution_event",
    "mcp_calls": "mcp_call",
    "snapshot_events": "snapshot_event",
    "model_calls": "model_call",
    "tool_calls": "tool_call",
    "tool_responses": "tool_response",
    "model_items": "model_item",
    "event_body_blobs": "body",
    "security_rule_events": "security_event",
    "security_decision_events": "security_event",
    "security_ask_events": "security_event",
}
LANE_OF_TYPE = {
    "trace": "trace", "turn": "trace", "net_event": "net", "dns_event": "net",
    "model_call": "model_call", "model_item": "model_item", "tool_call": "tool_call",
    "mcp_call": "tool_call", "tool_response": "tool_response", "body": "body",
    "security_event": "security_event", "fs_event": "host", "exec_event": "host",
    "audit_event": "host", "substitution_event": "host", "snapshot_event": "host",
}  # fmt: skip
# Whose body a blob is, by its source table, as the picture and the tree label it.
BODY_OWNERS = {"model_calls": "model call", "net_events": "HTTP", "tool_calls": "tool call"}
ANSWERED_ORIGINS = ("native", "local", "mcp_proxy")  # spec §6.2 check 6
EXPECTED_UNJOINED = ("mcp.tool_list", "mcp.event")  # spec §4.4: chatter with no primary row
UNPAIRABLE = "unpairable_tool_ids"
# Collapse hints for the page script: beyond `threshold` groups, keep `keep` at each end.
COLLAPSE = {"threshold": 12, "keep": 4, "chunk": 100}


def _short(value: Any, size: int = 8) -> str:
    shown = text(value, 40)
    return shown[:size] if len(shown) > size + 1 else shown


def _fmt_ms(value: Any) -> str:
    ms = as_float(value)
    if ms is None:
        return ""
    return f"{ms / 1000:.1f}s" if ms >= 1000 else f"{ms:.0f}ms"


def _fmt_bytes(value: Any) -> str:
    size = as_int(value)
    if size is None:
        return "?"
    for unit in ("B", "KB", "MB"):
        if size < 1024 or unit == "MB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


class GraphBuilder:
    """Builds nodes, edges and per-trace findings from a `TraceRows`."""

    def __init__(self, rows: TraceRows, links: SessionUrls, verdicts: RowVerdicts = NO_VERDICTS):
        self.rows = rows
        self.links = links
        self.verdicts = verdicts
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: list[dict[str, Any]] = []
        self.findings: dict[str, dict[str, Any]] = {}
        self.by_event: dict[str, list[str]] = defaultdict(list)  # event id -> primary nodes
        self.ambient = is_ambient(rows.trace_id)  # the VM's ambient trace: not a turn
        self.t0 = self._trace_start()
        self.anchor_times: list[float] = []
        self.group_of_call: dict[int, int] = {}
        self._calls_by_id: dict[Any, list[dict]] | None = None

    # -- public -------------------------------------------------------------------------

    def build(self) -> dict[str, Any]:
        self._groups()
        self._trace_and_turns()
        self._model_calls()
        self._tool_calls()
        self._tool_responses()
        self._unanswered_calls()
        self._model_items()
        self._other_rows()
        self._security_rows()
        self._bodies()
        return self._result()

    # -- time and groups ----------------------------------------------------------------

    def _trace_start(self) -> float | None:
        starts = [row_start_ms(r) for r in self._timed_rows()]
        starts = [s for s in starts if s is not None]
        return min(starts) if starts else None

    def _timed_rows(self) -> list[dict]:
        rows = self.rows
        found = rows.model_calls + rows.tool_calls + rows.model_items
        for table_rows in list(rows.other.values()) + list(rows.security.values()):
            found += table_rows
        return found

    def _groups(self) -> None:
        """Group 1..N: the model calls in time order, or every row when there are none."""
        anchors = self.rows.model_calls or sorted(
            self._anchor_rows(), key=lambda r: (row_start_ms(r) or 0.0, r["id"])
        )
        times = []
        for index, row in enumerate(anchors, start=1):
            if self.rows.model_calls:
                self.group_of_call[row["id"]] = index
            times.append(row_start_ms(row) or (times[-1] if times else 0.0))
        self.anchor_times = times

    def _anchor_rows(self) -> list[dict]:
        found = list(self.rows.tool_calls)
        for table_rows in self.rows.other.values():
            found += table_rows
        return found

    def _group_at(self, ms: float | None) -> int:
        if not self.anchor_times:
            return 0
        if ms is None:
            return len(self.anchor_times)
        return bisect.bisect_right(self.anchor_times, ms)

    # -- nodes, edges and findings --------------------------------------------------------

    def _offset(self, row: dict[str, Any]) -> float | None:
        start = row_start_ms(row)
        if start is None or self.t0 is None:
            return None
        return round(start - self.t0, 3)

    def _add_node(self, node_id: str, node_type: str, label: str, **fields: Any) -> dict:
        node = {
            "id": node_id,
            "type": node_type,
            "label": label,
            "row": None,
            "href": None,
            "group": 0,
            "lane": LANE_OF_TYPE.get(node_type, "host"),
            "findings": [],
            **fields,
        }
        self.nodes[node_id] = node
        return node

    def _row_node(self, table: str, row: dict[str, Any], label: str, **fields: Any) -> dict:
        node_type = NODE_TYPES[table]
        row_url = self.links.row(table, row.get("id"))
        event_id = row.get("event_id")
        values = {
            "table": table,
            "row_id": row.get("id"),
            "row": row_url,
            "href": self.links.event(event_id) if usable_event_id(event_id) else row_url,
            "event_id": event_id,
            "t": self._offset(row),
            "start": row.get("timestamp", row.get("timestamp_unix_ms")),
            "duration_ms": as_float(row.get("duration_ms")),
        }
        values.update(fields)
        node = self._add_node(f"{table}:{row.get('id')}", node_type, label, **values)
        if table in self.rows.primary_rows() and usable_event_id(event_id):
            self.by_event[event_id].append(node["id"])
        if not fields.get("external"):  # a row of another trace carries that trace's findings
            for verdict in self.verdicts.of(table, row.get("id")):
                self._finding(verdict.kind, verdict.severity, verdict.title, node["id"])
        return node

    def _edge(self, source: str, target: str, edge_type: str, **fields: Any) -> dict:
        edge = {"source": source, "target": target, "type": edge_type, "broken": False, **fields}
        self.edges.append(edge)
        return edge

    def _finding(self, kind: str, severity: str, title: str, node_id: str) -> None:
        """Record the rule book's verdict `kind` on a row node (decided by the check engine)."""
        entry = self.findings.setdefault(
            kind, {"kind": kind, "severity": severity, "title": title, "count": 0, "nodes": []}
        )
        if node_id not in entry["nodes"]:
            entry["nodes"].append(node_id)
            entry["count"] += 1
        self.nodes[node_id]["findings"].append(kind)

    def _relation(self, row_node: str, source: str, target: str, edge_type: str, kind: str):
        """An edge of the identity graph, drawn broken when the rule book found `kind` (or,
        for a pair Capsem could never match, `unpairable_tool_ids`) on the row at `row_node`."""
        for candidate in (kind, UNPAIRABLE):
            entry = self.findings.get(candidate)
            if entry is not None and row_node in entry["nodes"]:
                info = {k: entry[k] for k in ("severity", "title")}
                broken = entry["severity"] != "info"  # an info finding is a writer's habit
                self._edge(source, target, edge_type, broken=broken, finding=candidate, **info)
                return
        self._edge(source, target, edge_type)

    def _placeholder(self, key: str, node_type: str, label: str, group: int, **fields) -> str:
        node_id = f"missing:{key}"
        if node_id not in self.nodes:
            self._add_node(node_id, node_type, label, group=group, missing=True, **fields)
        return node_id

    def _model_call_ref(self, mc_id: Any, group: int) -> tuple[str | None, str]:
        """Node of a referenced model call: in trace, elsewhere (`external`) or missing."""
        if mc_id in self.group_of_call:
            return f"model_calls:{mc_id}", "inside"
        if mc_id in self.rows.outside_model_calls:
            outside = self.rows.outside_model_calls[mc_id]
            if outside is not None:
                node_id = f"model_calls:{mc_id}"
                if node_id not in self.nodes:
                    label = f"model call #{mc_id} (trace {_short(outside.get('trace_id'))})"
                    self._row_node("model_calls", outside, label, group=group, external=True)
                    self.nodes[node_id]["t"] = None
                return node_id, "outside"
        label = f"model call #{text(mc_id, 20)} — missing"
        return self._placeholder(f"model_calls:{mc_id}", "model_call", label, group), "missing"

    # -- the trace and its turns ----------------------------------------------------------

    def _trace_and_turns(self) -> None:
        trace_id = self.rows.trace_id
        label = f"ambient trace {_short(trace_id)}" if self.ambient else f"trace {_short(trace_id)}"
        self._add_node(
            "trace",
            "trace",
            label,
            title=trace_id,
            row=self.links.table("model_calls", trace_id=trace_id),
            href=self.links.trace(trace_id),
            t=0.0 if self.t0 is not None else None,
        )
        if self.ambient:  # each model call is an exchange of its own, under the trace
            return
        turns = dict.fromkeys(
            r.get("turn_id") for r in self.rows.model_calls if r.get("turn_id") is not None
        )
        for turn_id in turns:
            node_id = f"turn:{turn_id}"
            self._add_node(
                node_id,
                "turn",
                f"turn {_short(turn_id)}",
                title=str(turn_id),
                row=self.links.table("model_calls", turn_id=turn_id),
                href=self.links.table("model_calls", turn_id=turn_id),
            )
            self._edge("trace", node_id, "contains")

    # -- model calls, tool calls, responses, items ----------------------------------------

    def _model_calls(self) -> None:
        for row in self.rows.model_calls:
            tokens = (as_int(row.get("input_tokens")) or 0) + (
                as_int(row.get("output_tokens")) or 0
            )
            label = f"{text(row.get('model') or row.get('provider'), 28)} · {text(row.get('stop_reason'), 16) or '—'}"
            detail = f"{tokens} tok · {_fmt_ms(row.get('duration_ms'))}"
            node = self._row_node(
                "model_calls",
                row,
                label,
                detail=detail,
                group=self.group_of_call[row["id"]],
                tokens=tokens,
                cost=as_float(row.get("estimated_cost_usd")),
                stop_reason=row.get("stop_reason"),
                status_code=row.get("status_code"),
            )
            turn = f"turn:{row.get('turn_id')}"
            self._edge(turn if turn in self.nodes else "trace", node["id"], "contains")

    def _tool_calls(self) -> None:
        for row in self.rows.tool_calls:
            mc_id = row.get("model_call_id")
            group = self.group_of_call.get(mc_id) or self._group_at(row_start_ms(row))
            detail = " · ".join(text(v, 16) for v in (row.get("origin"), row.get("decision")) if v)
            node = self._row_node(
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
            parent, where = self._model_call_ref(mc_id, group)
            if where == "outside":
                self._edge(parent, node["id"], "emitted", cross_trace=True)
            else:
                self._relation(
                    node["id"], parent, node["id"], "emitted", "tool_call_parent_missing"
                )

    def _matching_call(self, response: dict[str, Any]) -> dict[str, Any] | None:
        """The tool call a response answers: same call_id, same trace (spec §6.2 check 3)."""
        if self._calls_by_id is None:
            self._calls_by_id = defaultdict(list)
            for call in self.rows.tool_calls:
                self._calls_by_id[call.get("call_id")].append(call)
        has_trace = self.rows.schema.has("tool_calls", "trace_id") and self.rows.schema.has(
            "tool_responses", "trace_id"
        )
        candidates = [
            c
            for c in self._calls_by_id.get(response.get("call_id"), [])
            if not has_trace or c.get("trace_id") == response.get("trace_id")
        ]
        if not candidates:
            return None
        consumer = as_int(response.get("model_call_id"))
        earlier = [c for c in candidates if (as_int(c.get("model_call_id")) or 0) < (consumer or 0)]
        return (earlier or candidates)[-1]

    def _tool_responses(self) -> None:
        for row in self.rows.tool_responses:
            call = self._matching_call(row)
            mc_id = row.get("model_call_id")
            group = self.group_of_call.get(mc_id) or (
                self.nodes[f"tool_calls:{call['id']}"]["group"] if call else len(self.anchor_times)
            )
            node = self._row_node(
                "tool_responses",
                row,
                f"response {_short(row.get('call_id'), 12)}",
                detail="error" if row.get("is_error") else "",
                group=group,
                call_id=text(row.get("call_id"), 80),
            )
            self._link_response_to_call(node["id"], row, call, group)
            self._link_response_to_consumer(node["id"], mc_id, group)

    def _link_response_to_call(self, node_id: str, row: dict, call: dict | None, group: int):
        if call is None:
            label = f"tool call {_short(row.get('call_id'), 12)} — missing"
            missing = self._placeholder(
                f"tool_calls:call_id:{row.get('call_id')}", "tool_call", label, group
            )
            self._relation(node_id, missing, node_id, "responded-in", "orphan_tool_response")
            return
        call_node = f"tool_calls:{call['id']}"
        self._relation(node_id, call_node, node_id, "responded-in", "response_before_call")

    def _link_response_to_consumer(self, node_id: str, mc_id: Any, group: int) -> None:
        consumer, where = self._model_call_ref(mc_id, group)
        if where == "outside":
            self._edge(node_id, consumer, "consumed-by", cross_trace=True)
        else:
            kind = "tool_response_parent_missing"
            self._relation(node_id, node_id, consumer, "consumed-by", kind)

    def _unanswered_calls(self) -> None:
        answered = {(r.get("call_id"), r.get("trace_id")) for r in self.rows.tool_responses}
        answered_ids = {r.get("call_id") for r in self.rows.tool_responses}
        has_trace = self.rows.schema.has("tool_responses", "trace_id")
        for row in self.rows.tool_calls:
            if row.get("origin", "native") not in ANSWERED_ORIGINS:
                continue
            key = (row.get("call_id"), row.get("trace_id"))
            if (key in answered) if has_trace else (row.get("call_id") in answered_ids):
                continue
            node_id = f"tool_calls:{row['id']}"
            group = self.nodes[node_id]["group"]
            missing = self._placeholder(
                f"tool_responses:call_id:{row.get('call_id')}",
                "tool_response",
                "no response",
                group,
            )
            self._relation(node_id, node_id, missing, "responded-in", "tool_call_without_response")

    def _model_items(self) -> None:
        calls = {(c.get("call_id"), c.get("model_call_id")): c for c in self.rows.tool_calls}
        responses = defaultdict(list)
        for response in self.rows.tool_responses:
            responses[response.get("call_id")].append(response)
        for row in self.rows.model_items:
            mc_id = row.get("model_call_id")
            group = self.group_of_call.get(mc_id) or self._group_at(row_start_ms(row))
            kind = text(row.get("kind"), 16)
            label = f"{text(row.get('item_index'), 6)}. {kind}"
            if row.get("tool_name"):
                label += f" {text(row.get('tool_name'), 20)}"
            node = self._row_node(
                "model_items",
                row,
                label,
                group=group,
                kind=row.get("kind"),
                order=as_int(row.get("item_index")),
            )
            parent, where = self._model_call_ref(mc_id, group)
            if where == "outside":
                self._edge(parent, node["id"], "owns", cross_trace=True)
            else:
                self._relation(node["id"], parent, node["id"], "owns", "orphan_model_item")
            self._link_item(node["id"], row, calls, responses, group)

    def _link_item(self, node_id: str, row: dict, calls: dict, responses: dict, group: int):
        call_id = row.get("call_id")
        if row.get("kind") == "tool_call":
            call = calls.get((call_id, row.get("model_call_id")))
            if call is not None:
                self._edge(node_id, f"tool_calls:{call['id']}", "describes")
                return
            label = f"tool call {_short(call_id, 12)} — missing"
            missing = self._placeholder(f"tool_calls:call_id:{call_id}", "tool_call", label, group)
            self._relation(node_id, node_id, missing, "describes", "orphan_model_item")
        elif row.get("kind") == "tool_response":
            found = responses.get(call_id)
            if found:
                same_call = [r for r in found if r.get("model_call_id") == row.get("model_call_id")]
                self._edge(node_id, f"tool_responses:{(same_call or found)[-1]['id']}", "describes")
            elif call_id not in self.rows.present_response_call_ids:
                label = f"tool response {_short(call_id, 12)} — missing"
                missing = self._placeholder(
                    f"tool_responses:call_id:{call_id}", "tool_response", label, group
                )
                self._relation(node_id, node_id, missing, "describes", "orphan_model_item")

    # -- rows joined by trace_id only ---------------------------------------------------

    def _other_rows(self) -> None:
        correlated = correlate_net(self.rows)
        for table, rows in self.rows.other.items():
            for row in rows:
                label, detail = _other_label(table, row)
                mc_id = correlated.get(row["id"]) if table == "net_events" else None
                group = self.group_of_call.get(mc_id) or self._group_at(row_start_ms(row))
                node = self._row_node(table, row, label, detail=detail, group=group)
                if mc_id is not None:
                    self._edge(node["id"], f"model_calls:{mc_id}", "correlated")
                elif self.ambient:  # session-wide rows: no exchange owns them
                    node["lane"] = "ambient"
        self._audit_links()

    def _audit_links(self) -> None:
        execs = {row["id"] for row in self.rows.other.get("exec_events", [])}
        for row in self.rows.other.get("audit_events", []):
            exec_id = row.get("exec_event_id")
            if exec_id is None:
                continue
            node_id = f"audit_events:{row['id']}"
            if exec_id in execs:
                self._edge(f"exec_events:{exec_id}", node_id, "spawned")
            elif exec_id not in self.rows.present_exec_ids:
                group = self.nodes[node_id]["group"]
                label = f"exec #{text(exec_id, 20)} — missing"
                missing = self._placeholder(f"exec_events:{exec_id}", "exec_event", label, group)
                self._relation(node_id, missing, node_id, "spawned", "audit_exec_missing")

    # -- security rows --------------------------------------------------------------------

    def _security_rows(self) -> None:
        rule_nodes: dict[str, list[str]] = defaultdict(list)
        for table in ("security_rule_events", "security_decision_events", "security_ask_events"):
            for row in self.rows.security.get(table, []):
                node = self._security_node(table, row)
                event_id = row.get("event_id")
                parents = self.by_event.get(event_id, [])
                if table == "security_rule_events":
                    rule_nodes[event_id].append(node["id"])
                if parents:
                    for parent in parents:
                        self._edge(parent, node["id"], "event_id")
                    node["group"] = self.nodes[parents[0]]["group"]
                elif table == "security_rule_events":
                    self._unjoined_rule(node, row)
                elif rule_nodes.get(event_id):
                    node["group"] = self.nodes[rule_nodes[event_id][0]]["group"]
                    self._edge(rule_nodes[event_id][0], node["id"], "event_id")

    def _security_node(self, table: str, row: dict[str, Any]) -> dict:
        outcome = row.get("rule_action") or row.get("effective_decision") or row.get("status")
        kind = {"security_rule_events": "rule", "security_decision_events": "decision"}.get(
            table, "ask"
        )
        label = f"{kind}: {text(row.get('event_type'), 22)} {text(outcome, 10)}"
        detail = text(row.get("rule_id"), 40)
        return self._row_node(
            table,
            row,
            label,
            detail=detail,
            subtype=kind,
            group=self._group_at(row_start_ms(row)),
            href=self.links.event(row["event_id"])
            if usable_event_id(row.get("event_id"))
            else self.links.row(table, row.get("id")),
        )

    def _unjoined_rule(self, node: dict, row: dict[str, Any]) -> None:
        """A rule row whose event has no row in this trace: elsewhere, expected, or broken."""
        event_type, event_id = row.get("event_type"), row.get("event_id")
        target_table = EVENT_TYPE_TABLES.get(event_type or "")
        if event_type in EXPECTED_UNJOINED or target_table is None:
            return
        if event_id in self.rows.present_event_ids.get(target_table, set()):
            return  # the row exists, in another trace
        kind = "unledgered_mcp_call" if event_type == "mcp.tool_call" else "dangling_security_event"
        node_type = NODE_TYPES.get(target_table, "host")
        label = f"{node_type.replace('_', ' ')} for event {_short(event_id, 12)} — missing"
        missing = self._placeholder(
            f"{target_table}:event:{event_id}", node_type, label, node["group"]
        )
        self._relation(node["id"], missing, node["id"], "event_id", kind)

    # -- bodies ---------------------------------------------------------------------------

    def _bodies(self) -> None:
        for row in self.rows.bodies:
            event_id, source = row.get("event_id"), row.get("source_table")
            owner = BODY_OWNERS.get(source) or text(source, 20)
            size = _fmt_bytes(row.get("stored_bytes"))
            label = f"{owner} {text(row.get('direction'), 10)} body {size}"
            parents = [
                p for p in self.by_event.get(event_id, []) if self.nodes[p].get("table") == source
            ]
            group = self.nodes[parents[0]]["group"] if parents else self._group_at(None)
            node = self._row_node(
                "event_body_blobs",
                row,
                label,
                detail=text(row.get("content_type"), 30),
                group=group,
                href=self.links.body(event_id, row["id"])
                if usable_event_id(event_id)
                else self.links.row("event_body_blobs", row.get("id")),
                hash_verdict=self.rows.body_hash.get(row["id"]),
            )
            node["t"] = self.nodes[parents[0]]["t"] if parents else None
            for parent in parents:
                self._edge(parent, node["id"], "event_id")
            if not parents and event_id not in self.rows.present_event_ids.get(source, set()):
                self._orphan_body(node, row)

    def _orphan_body(self, node: dict, row: dict[str, Any]) -> None:
        source = row.get("source_table")
        node_type = NODE_TYPES.get(source, "host")
        label = (
            f"{node_type.replace('_', ' ')} for event {_short(row.get('event_id'), 12)} — missing"
        )
        missing = self._placeholder(
            f"{source}:event:{row.get('event_id')}", node_type, label, node["group"]
        )
        self._relation(node["id"], missing, node["id"], "event_id", "orphan_body_blob")

    # -- result ---------------------------------------------------------------------------

    def _result(self) -> dict[str, Any]:
        nodes = sorted(
            self.nodes.values(),
            key=lambda n: (
                n["group"],
                LANES.index(n["lane"]),
                n.get("t") or 0.0,
                as_int(n.get("order")) or 0,
                n["row_id"] if isinstance(n.get("row_id"), int) else 0,
                n["id"],
            ),
        )
        findings = sorted(
            self.findings.values(), key=lambda f: (Severity.rank(f["severity"]), f["kind"])
        )
        return {
            "trace_id": self.rows.trace_id,
            "ambient": self.ambient,
            "exchange": self.rows.exchange,
            "nodes": nodes,
            "edges": self.edges,
            "findings": findings,
            "groups": self._group_summaries(nodes),
            "lanes": list(LANES),
            # What one column (group) of the drawing holds: a model call and what it owns, or,
            # in a trace with no model call, one row.
            "group_unit": "model call" if self.rows.model_calls else "row",
            "collapse": COLLAPSE,
            "notes": list(self.rows.notes),
        }

    def _group_summaries(self, nodes: list[dict]) -> list[dict[str, Any]]:
        groups: dict[int, dict[str, Any]] = {}
        for node in nodes:
            group = groups.setdefault(
                node["group"],
                {"index": node["group"], "nodes": 0, "tokens": 0, "broken": False, "label": ""},
            )
            group["nodes"] += 1
            group["tokens"] += node.get("tokens") or 0
            serious = [
                k for k in node["findings"] if self.findings[k]["severity"] in ("error", "warning")
            ]
            if serious or node.get("missing"):
                group["broken"] = True
            if node["type"] == "model_call" and not group["label"] and not node.get("external"):
                group["label"] = node["label"]
        return [groups[i] for i in sorted(groups)]


def _other_label(table: str, row: dict[str, Any]) -> tuple[str, str]:
    """Label and detail line of a row joined to the trace by trace_id only."""
    if table == "net_events":
        label = f"{text(row.get('method') or 'CONNECT', 8)} {text(row.get('domain'), 28)}"
        return label, f"{text(row.get('status_code'), 4)} {text(row.get('decision'), 10)}"
    if table == "dns_events":
        return f"dns {text(row.get('qname'), 30)}", text(row.get("decision"), 12)
    if table == "fs_events":
        return f"{text(row.get('action'), 10)} {text(row.get('path'), 28)}", ""
    if table == "exec_events":
        return f"exec {text(row.get('command'), 30)}", f"exit {text(row.get('exit_code'), 6)}"
    if table == "audit_events":
        return f"audit {text(row.get('exe'), 30)}", text(row.get("argv"), 40)
    if table == "substitution_events":
        return f"credential {text(row.get('outcome'), 12)}", text(row.get("provider"), 20)
    if table == "mcp_calls":
        return f"MCP {text(row.get('tool_name') or row.get('method'), 28)}", text(
            row.get("server_name"), 24
        )
    if table == "snapshot_events":
        return f"snapshot {text(row.get('name') or row.get('slot'), 24)}", text(
            row.get("origin"), 20
        )
    return table, ""


def build_graph(
    rows: TraceRows, links: SessionUrls, verdicts: RowVerdicts = NO_VERDICTS
) -> dict[str, Any]:
    """graph.json for one trace: nodes, edges, findings, groups and layout hints."""
    return GraphBuilder(rows, links, verdicts).build()
