"""The identity graph while it is drawn: nodes, edges and the trace's findings.

A row node carries the findings the check engine (the one rule book) reported for its row
(`RowVerdicts`); an edge is drawn `broken`, with the finding's kind, title and severity, when
the row it belongs to carries the matching finding; a row that should exist and does not is a
placeholder node (`missing: true`). So the picture and the integrity report always agree, and
nothing here decides a rule. Each node has a `group` (`groups.py`) and a `lane` (its kind of
row), which the page's script uses to lay the graph out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from datasette_capsem.checks.model import RowVerdicts
from datasette_capsem.graph.exchanges import is_ambient
from datasette_capsem.graph.groups import Groups
from datasette_capsem.graph.trace_rows import TraceRows
from datasette_capsem.graph.values import as_float, usable_event_id
from datasette_capsem.ledger.tables import TABLES
from datasette_capsem.urls import SessionUrls

# The drawing's lanes, top to bottom: (lane, name on the page, spine slot). A same-column edge
# runs down a spine left of the column, one per source lane. The page's script reads them from
# graph.json's `lane_info`.
LANE_INFO: tuple[tuple[str, str, int], ...] = (
    ("trace", "trace / turn", 0),
    ("net", "net / dns", 2),
    ("model_call", "model calls", 1),
    ("model_item", "model items", 4),
    ("tool_call", "tool calls", 3),
    ("tool_response", "tool responses", 4),
    ("body", "bodies", 4),
    ("security_event", "security", 4),
    ("host", "fs / exec / audit", 2),
    ("ambient", "ambient (session-wide)", 2),
)
LANES = tuple(lane for lane, _, _ in LANE_INFO)
NODE_TYPES = {table.name: table.node_type for table in TABLES if table.node_type}
LANE_OF_TYPE = {"trace": "trace", "turn": "trace"} | {
    table.node_type: table.lane for table in TABLES if table.node_type
}
UNPAIRABLE = "unpairable_tool_ids"


class Drawing:
    """Nodes, edges and per-trace findings of one trace, added row by row."""

    def __init__(self, rows: TraceRows, links: SessionUrls, verdicts: RowVerdicts):
        self.rows = rows
        self.links = links
        self.verdicts = verdicts
        self.nodes: dict[str, dict[str, Any]] = {}
        self.edges: list[dict[str, Any]] = []
        self.findings: dict[str, dict[str, Any]] = {}
        self.by_event: dict[str, list[str]] = defaultdict(list)  # event id -> primary nodes
        self.ambient = is_ambient(rows.trace_id)  # the VM's ambient trace: not a turn
        self.groups = Groups(rows)

    def add_node(self, node_id: str, node_type: str, label: str, **fields: Any) -> dict:
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

    def row_node(self, table: str, row: dict[str, Any], label: str, **fields: Any) -> dict:
        """The node of one ledger row, with the rule book's verdicts on that row."""
        row_url = self.links.row(table, row.get("id"))
        event_id = row.get("event_id")
        values = {
            "table": table,
            "row_id": row.get("id"),
            "row": row_url,
            "href": self.links.event(event_id) if usable_event_id(event_id) else row_url,
            "event_id": event_id,
            "t": self.groups.offset(row),
            "start": row.get("timestamp", row.get("timestamp_unix_ms")),
            "duration_ms": as_float(row.get("duration_ms")),
        }
        values.update(fields)
        node = self.add_node(f"{table}:{row.get('id')}", NODE_TYPES[table], label, **values)
        if table in self.rows.primary_rows() and usable_event_id(event_id):
            self.by_event[event_id].append(node["id"])
        if not fields.get("external"):  # a row of another trace carries that trace's findings
            for verdict in self.verdicts.of(table, row.get("id")):
                self.finding(verdict.kind, verdict.severity, verdict.title, node["id"])
        return node

    def edge(self, source: str, target: str, edge_type: str, **fields: Any) -> dict:
        edge = {"source": source, "target": target, "type": edge_type, "broken": False, **fields}
        self.edges.append(edge)
        return edge

    def finding(self, kind: str, severity: str, title: str, node_id: str) -> None:
        """Record the rule book's verdict `kind` on a row node (decided by the check engine)."""
        entry = self.findings.setdefault(
            kind, {"kind": kind, "severity": severity, "title": title, "count": 0, "nodes": []}
        )
        if node_id not in entry["nodes"]:
            entry["nodes"].append(node_id)
            entry["count"] += 1
        self.nodes[node_id]["findings"].append(kind)

    def relation(
        self, row_node: str, source: str, target: str, edge_type: str, kind: str, **fields: Any
    ) -> None:
        """An edge of the identity graph, drawn broken when the rule book found `kind` (or,
        for a pair Capsem could never match, `unpairable_tool_ids`) on the row at `row_node`."""
        for candidate in (kind, UNPAIRABLE):
            entry = self.findings.get(candidate)
            if entry is not None and row_node in entry["nodes"]:
                info = {k: entry[k] for k in ("severity", "title")}
                broken = entry["severity"] != "info"  # an info finding is a writer's habit
                self.edge(
                    source, target, edge_type, broken=broken, finding=candidate, **info, **fields
                )
                return
        self.edge(source, target, edge_type, **fields)

    def placeholder(self, key: str, node_type: str, label: str, group: int, **fields) -> str:
        """The node of a row that should exist and does not (one per missing row)."""
        node_id = f"missing:{key}"
        if node_id not in self.nodes:
            self.add_node(node_id, node_type, label, group=group, missing=True, **fields)
        return node_id
