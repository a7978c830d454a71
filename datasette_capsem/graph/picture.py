"""picture.json: what the trace page's script (static/capsem-graph.js) draws of graph.json.

graph.json is the identity graph whole, an export: every node carries its row's link, table,
row id, event id, start, duration and more. The picture reads a node's id, type, lane, group,
label, detail, title, findings, missing, external and link, and an edge's ends, type and
broken link. For a 500-call trace that is 2.5 MB of graph.json's 4.5 MB, and the browser's
decoding and parsing of the answer was the largest part of drawing the picture (2026-11-30,
Chromium's profile). Empty values are left out, as the script reads a missing key as empty.
"""

from __future__ import annotations

from typing import Any

# Always kept: the script writes these into the drawing as they are.
NODE_KEYS = ("id", "type", "lane", "group", "label")
NODE_OPTIONAL = ("detail", "title", "findings", "missing", "external", "href")
EDGE_KEYS = ("source", "target", "type")
EDGE_OPTIONAL = ("broken", "severity", "title", "cross_trace")


def _empty(value: Any) -> bool:
    """None, False, "" or [] (not 0, which is a value)."""
    return value is None or value is False or (isinstance(value, (str, list)) and not value)


def _pick(item: dict[str, Any], keys: tuple[str, ...], optional: tuple[str, ...]) -> dict:
    picked = {key: item.get(key) for key in keys}
    picked.update((key, item[key]) for key in optional if not _empty(item.get(key)))
    return picked


def picture(graph: dict[str, Any]) -> dict[str, Any]:
    """graph.json (graph/build.py) without what the picture does not draw."""
    return {
        **{key: value for key, value in graph.items() if key not in ("nodes", "edges")},
        "nodes": [_pick(node, NODE_KEYS, NODE_OPTIONAL) for node in graph["nodes"]],
        "edges": [_pick(edge, EDGE_KEYS, EDGE_OPTIONAL) for edge in graph["edges"]],
    }
