"""The rows hung on a trace's spine by trace id, event id or time (spec §6.1, §4.4).

HTTP, DNS, file, process, credential, MCP and snapshot rows share the trace's id; an HTTP row
of a model exchange is `correlated` to its model call (by trace, method, path and time), an
audit row is `spawned` by its exec; security rows and bodies hang by `event_id` under the row
that emitted the event. A security row whose event is expected to have no row (MCP chatter) is
left alone; one whose row exists nowhere, and a body whose owner is missing, point at a
placeholder through an edge the rule book's finding breaks.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from datasette_capsem.graph.drawing import NODE_TYPES, Drawing
from datasette_capsem.graph.exchanges import correlate_net
from datasette_capsem.graph.labels import body_label, missing_event_row, row_label
from datasette_capsem.graph.trace_rows import EVENT_TYPE_TABLES, row_start_ms
from datasette_capsem.graph.values import text, usable_event_id
from datasette_capsem.ledger.tables import TABLE, joined_by

EXPECTED_UNJOINED = ("mcp.tool_list", "mcp.event")  # spec §4.4: chatter with no primary row
SECURITY_TABLES = tuple(table.name for table in joined_by("event_id"))


def draw_attached(drawing: Drawing) -> None:
    _other_rows(drawing)
    _audit_links(drawing)
    _security_rows(drawing)
    _bodies(drawing)


def _other_rows(drawing: Drawing) -> None:
    correlated = correlate_net(drawing.rows)
    for table, rows in drawing.rows.other.items():
        for row in rows:
            label, detail = row_label(table, row)
            mc_id = correlated.get(row["id"]) if table == "net_events" else None
            group = drawing.groups.of_row(row, mc_id)
            node = drawing.row_node(table, row, label, detail=detail, group=group)
            if mc_id is not None:
                drawing.edge(node["id"], f"model_calls:{mc_id}", "correlated")
            elif drawing.ambient:  # session-wide rows: no exchange owns them
                node["lane"] = "ambient"


def _audit_links(drawing: Drawing) -> None:
    execs = {row["id"] for row in drawing.rows.other.get("exec_events", [])}
    for row in drawing.rows.other.get("audit_events", []):
        exec_id = row.get("exec_event_id")
        if exec_id is None:
            continue
        node_id = f"audit_events:{row['id']}"
        if exec_id in execs:
            drawing.edge(f"exec_events:{exec_id}", node_id, "spawned")
        elif exec_id not in drawing.rows.present_exec_ids:
            group = drawing.nodes[node_id]["group"]
            label = f"exec #{text(exec_id, 20)} — missing"
            missing = drawing.placeholder(f"exec_events:{exec_id}", "exec_event", label, group)
            drawing.relation(node_id, missing, node_id, "spawned", "audit_exec_missing")


def _security_rows(drawing: Drawing) -> None:
    rule_nodes: dict[str, list[str]] = defaultdict(list)
    for table in SECURITY_TABLES:
        for row in drawing.rows.security.get(table, []):
            node = _security_node(drawing, table, row)
            event_id = row.get("event_id")
            parents = drawing.by_event.get(event_id, [])
            if table == "security_rule_events":
                rule_nodes[event_id].append(node["id"])
            if parents:
                for parent in parents:
                    drawing.edge(parent, node["id"], "event_id")
                node["group"] = drawing.nodes[parents[0]]["group"]
            elif table == "security_rule_events":
                _unjoined_rule(drawing, node, row)
            elif rule_nodes.get(event_id):
                node["group"] = drawing.nodes[rule_nodes[event_id][0]]["group"]
                drawing.edge(rule_nodes[event_id][0], node["id"], "event_id")


def _security_node(drawing: Drawing, table: str, row: dict[str, Any]) -> dict:
    label, detail = row_label(table, row)
    return drawing.row_node(
        table,
        row,
        label,
        detail=detail,
        subtype=TABLE[table].subtype,
        group=drawing.groups.at(row_start_ms(row)),
        href=drawing.links.event(row["event_id"])
        if usable_event_id(row.get("event_id"))
        else drawing.links.row(table, row.get("id")),
    )


def _unjoined_rule(drawing: Drawing, node: dict, row: dict[str, Any]) -> None:
    """A rule row whose event has no row in this trace: elsewhere, expected, or broken."""
    event_type, event_id = row.get("event_type"), row.get("event_id")
    target_table = EVENT_TYPE_TABLES.get(event_type or "")
    if event_type in EXPECTED_UNJOINED or target_table is None:
        return
    if event_id in drawing.rows.present_event_ids.get(target_table, set()):
        return  # the row exists, in another trace
    kind = "unledgered_mcp_call" if event_type == "mcp.tool_call" else "dangling_security_event"
    _to_missing_owner(drawing, node, target_table, event_id, kind)


def _to_missing_owner(drawing: Drawing, node: dict, table: str, event_id: Any, kind: str):
    """The broken `event_id` edge from a row to the placeholder of the row its event names."""
    node_type = NODE_TYPES.get(table, "host")
    label = missing_event_row(node_type, event_id)
    missing = drawing.placeholder(f"{table}:event:{event_id}", node_type, label, node["group"])
    drawing.relation(node["id"], missing, node["id"], "event_id", kind)


def _bodies(drawing: Drawing) -> None:
    for row in drawing.rows.bodies:
        event_id, source = row.get("event_id"), row.get("source_table")
        parents = [
            p for p in drawing.by_event.get(event_id, []) if drawing.nodes[p].get("table") == source
        ]
        group = drawing.nodes[parents[0]]["group"] if parents else drawing.groups.at(None)
        node = drawing.row_node(
            "event_body_blobs",
            row,
            body_label(row),
            detail=text(row.get("content_type"), 30),
            group=group,
            href=drawing.links.body(event_id, row["id"])
            if usable_event_id(event_id)
            else drawing.links.row("event_body_blobs", row.get("id")),
            hash_verdict=drawing.rows.body_hash.get(row["id"]),
        )
        node["t"] = drawing.nodes[parents[0]]["t"] if parents else None
        for parent in parents:
            drawing.edge(parent, node["id"], "event_id")
        if not parents and event_id not in drawing.rows.present_event_ids.get(source, set()):
            _to_missing_owner(drawing, node, source, event_id, "orphan_body_blob")
