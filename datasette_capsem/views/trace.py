"""`/-/capsem/sessions/<id>/traces/<trace_id>`: one agent turn end to end.

The page draws the identity graph (by `static/capsem-graph.js`, from `graph.json`) beside a
waterfall of every timed row. The same data is served as `.json` (summary, graph and
waterfall), `/graph.json` (the graph alone) and `.otlp.json` (OpenTelemetry export).
"""

from __future__ import annotations

from typing import Any

from datasette_capsem import errors
from datasette_capsem.graph.build import build_graph
from datasette_capsem.graph.exchanges import is_ambient, scope_to_exchange
from datasette_capsem.graph.otlp import export_trace
from datasette_capsem.graph.trace_rows import TraceRows, load_trace, row_summary
from datasette_capsem.graph.values import as_float, as_int
from datasette_capsem.graph.waterfall import waterfall_rows
from datasette_capsem.views import render
from datasette_capsem.views.session import (
    Opened,
    bad_value,
    open_session,
    row_verdicts,
    url_value,
)


def trace_summary(rows: TraceRows, waterfall: dict[str, Any]) -> dict[str, Any]:
    """Totals of the trace, as listed on the session page."""
    calls = sorted(rows.model_calls, key=lambda r: (str(r.get("timestamp") or ""), r["id"]))
    return {
        "trace_id": rows.trace_id,
        "ambient": is_ambient(rows.trace_id),
        "exchange": rows.exchange,
        "start": waterfall["start"],
        "duration_ms": waterfall["duration_ms"],
        "model_calls": len(calls),
        "tool_calls": len(rows.tool_calls),
        "input_tokens": sum(as_int(c.get("input_tokens")) or 0 for c in calls),
        "output_tokens": sum(as_int(c.get("output_tokens")) or 0 for c in calls),
        "cost_usd": round(sum(as_float(c.get("estimated_cost_usd")) or 0.0 for c in calls), 6),
        "final_stop_reason": calls[-1].get("stop_reason") if calls else None,
        "providers": sorted({str(c.get("provider")) for c in calls if c.get("provider")}),
        "rows": row_summary(rows),
    }


def _scoped(links, rows: TraceRows, suffix: str) -> str:
    """A URL of this trace page's data, keeping the exchange it is scoped to."""
    if rows.exchange is not None:
        return links.exchange(rows.trace_id, rows.exchange, suffix)
    return links.trace(rows.trace_id, suffix)


async def _load(datasette, request) -> tuple[Opened, TraceRows]:
    opened = await open_session(datasette, request, need_ledger=True)
    trace_id = url_value(request, "trace_id")
    problem = bad_value(trace_id, "trace id")
    if problem:
        raise errors.bad_parameter("Bad trace id", problem)
    exchange = request.args.get("exchange")
    if exchange is not None and not exchange.isdigit():
        raise errors.bad_parameter("Bad exchange", "exchange must be a model call id (digits).")
    schema = opened.schema
    rows = await opened.db.execute_fn(lambda conn: load_trace(conn, schema, trace_id))
    if exchange is not None and not rows.empty:
        if int(exchange) not in {row["id"] for row in rows.model_calls}:
            raise errors.not_found(
                "Unknown exchange",
                f"Trace {trace_id!r} of session {opened.session.id} has no model call {exchange}.",
                [{"id": trace_id, "name": None, "href": opened.links.trace(trace_id)}],
            )
        scope_to_exchange(rows, int(exchange))
    if rows.empty:
        session = opened.session
        raise errors.not_found(
            "Unknown trace",
            f"No row of session {session.id} carries the trace id {trace_id!r}.",
            [{"id": session.id, "name": session.display_name, "href": opened.links.session()}],
        )
    return opened, rows


async def trace_page(datasette, request):
    opened, rows = await _load(datasette, request)
    suffix = request.url_vars.get("suffix") or ""
    links, session = opened.links, opened.session
    if suffix == ".otlp.json":
        return render.json_response(export_trace(rows, session.id), filename="trace.otlp.json")
    graph = build_graph(rows, links, await row_verdicts(datasette, opened))
    graph["session_id"] = session.id
    if suffix == "/graph.json":
        return render.json_response(graph)
    waterfall = waterfall_rows(rows, links)
    summary = trace_summary(rows, waterfall)
    if suffix == ".json":
        return render.json_response(
            {"session": session.summary(), "trace": summary, "graph": graph, "waterfall": waterfall}
        )
    context = {
        "session": session.summary(),
        "display_name": session.display_name,
        "trace": summary,
        "findings": graph["findings"],
        "notes": graph["notes"],
        "waterfall": waterfall,
        "node_count": len(graph["nodes"]),
        "edge_count": len(graph["edges"]),
        "links": {
            "session": links.session(),
            "trace_page": links.trace(rows.trace_id),
            "graph": _scoped(links, rows, "/graph.json"),
            "json": _scoped(links, rows, ".json"),
            "otlp": _scoped(links, rows, ".otlp.json"),
        },
    }
    return await render.page(datasette, request, "trace.html", context)


ROUTES = [
    (
        r"^/-/capsem/sessions/(?P<session_id>[^/]+)/traces/(?P<trace_id>[^/]+?)"
        r"(?P<suffix>\.otlp\.json|\.json|/graph\.json)?$",
        trace_page,
    ),
]
