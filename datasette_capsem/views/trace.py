"""`/-/capsem/sessions/<id>/traces/<trace_id>`: one agent turn end to end.

The page is a skeleton: its scripts fetch the span tree (`/tree.json`, drawn with its timeline
by `static/capsem-trace.js`), a selected row in full (`/node.json?id=TABLE:ROW_ID`, for the
detail panel) and the identity graph as drawn (`/picture.json`, graph/picture.py, drawn by
`static/capsem-graph.js`). The graph whole is `/graph.json`; the same data is served as
`.json` (summary, graph and waterfall) and `.otlp.json` (OpenTelemetry export). The rows and graph of the traces viewed last are cached per ledger version
(`CapsemState.traces`), so the page and its JSON build them once.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from typing import Any

from datasette_capsem import errors, redaction
from datasette_capsem.graph.build import build_graph
from datasette_capsem.graph.conversation import (
    build_steps,
    load_conversation,
    load_turn_preview,
)
from datasette_capsem.graph.detail import load_node, parse_node_id
from datasette_capsem.graph.exchanges import is_ambient, scope_to_exchange
from datasette_capsem.graph.otlp import export_trace
from datasette_capsem.graph.picture import picture
from datasette_capsem.graph.trace_rows import (
    TraceRows,
    load_trace,
    row_summary,
    without_free_text,
)
from datasette_capsem.graph.tree import build_tree
from datasette_capsem.graph.values import as_float, as_int
from datasette_capsem.graph.waterfall import waterfall_rows
from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import pending, render, trace_cache
from datasette_capsem.views.event import body_links, trace_locator
from datasette_capsem.views.follow import follow_context
from datasette_capsem.views.integrity import row_verdicts, row_verdicts_held, validator
from datasette_capsem.views.opening import Opened, bad_value, open_session, url_value

log = logging.getLogger(__name__)

FINDING_NODES = 12  # rows listed per finding on the page; the search finds the rest
PANEL_MESSAGES = 40  # a model call's input messages in the detail panel (its last ones)


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


async def cached_graph(datasette, opened: Opened, rows: TraceRows) -> dict[str, Any]:
    """The identity graph of `rows` (built once per ledger version, trace and exchange)."""
    verdicts = await row_verdicts(datasette, opened)

    async def compute():
        return build_graph(rows, opened.links, verdicts)

    key = (opened.session.id, rows.trace_id, rows.exchange, "graph", hides_free_text())
    entry, _ = await get_state(datasette).traces.get(key, validator(opened), compute)
    return entry.report


JSON_ANSWERS = ("/tree.json", "/graph.json", "/picture.json", "/conversation.json")
# What the page's scripts fetch right after its HTML, in the order they draw them.
PAGE_FETCHES = ("/tree.json", "/picture.json")
# The page's answers being built for a reader policy (prepare): held until done (the loop
# keeps weak references), and what a fetch of a later one waits for.
_preparing: dict[tuple, asyncio.Task] = {}
# The answers that share their texts (the graph's labels, kinds and links), masked once.
_SHARED_MASKS = ("/tree.json", "/graph.json", "/picture.json")


def _page_build(opened: Opened, rows: TraceRows) -> tuple:
    """Which page's answers for which reader (policy in the key, as every stored text)."""
    policy = (redaction.policy.get(), redaction.hide_free_text.get())
    return (opened.session.id, rows.trace_id, rows.exchange, *policy)


async def _masks(datasette, opened: Opened, rows: TraceRows) -> dict[str, str] | None:
    """The masked texts of this trace's graph (text -> its mask) for the answers built from
    it, kept with the graph while the ledger is unchanged; None for a reader who sees all."""
    if redaction.policy.get() == redaction.OPEN:
        return None

    async def compute() -> dict[str, str]:
        return {}

    key = (opened.session.id, rows.trace_id, rows.exchange, "masks")
    entry, _ = await get_state(datasette).traces.get(key, validator(opened), compute)
    return entry.report


async def answer(
    datasette, opened: Opened, rows: TraceRows, suffix: str, history: int | None = None
) -> str:
    """The JSON text of tree.json, graph.json, picture.json or conversation.json (`history`:
    its `?step=N`) for the current reader, built once per ledger version and policy
    (views/trace_cache.py). The tree and picture are built off the event loop, which stays
    free for the page's other requests."""
    session = opened.session

    async def build() -> dict[str, Any]:
        if suffix == "/conversation.json":
            return await conversation_answer(datasette, opened, rows, history)
        graph = {**await cached_graph(datasette, opened, rows), "session_id": session.id}
        if suffix == "/graph.json":
            return graph
        if suffix == "/picture.json":
            return await asyncio.to_thread(picture, graph)
        return {**await asyncio.to_thread(build_tree, rows, graph), "session_id": session.id}

    masks = await _masks(datasette, opened, rows) if suffix in _SHARED_MASKS else None
    name = f"{suffix}|{rows.trace_id}|{rows.exchange}|{history}"
    return await trace_cache.json_text(datasette, opened, name, build, masks)


async def page_facts(datasette, opened: Opened, rows: TraceRows) -> dict[str, Any]:
    """What the page's HTML shows of the trace: its totals, findings, notes and counts.

    Kept as a small answer of its own (views/trace_cache.py: once per ledger version and
    policy, on disk for a stopped session), so the HTML neither walks the trace's 3,000
    waterfall rows on every request nor, after a restart, builds the whole graph again: its
    scripts' tree.json and graph.json are read back from the store, and so is this."""

    async def build() -> dict[str, Any]:
        graph = await cached_graph(datasette, opened, rows)
        waterfall = waterfall_rows(rows, opened.links)
        calls = sorted(rows.model_calls, key=lambda r: (str(r.get("timestamp") or ""), r["id"]))
        preview = {"request_preview": None, "response_preview": None}
        if calls:
            first, last = calls[0]["id"], calls[-1]["id"]
            preview = await opened.db.execute_fn(
                lambda conn: load_turn_preview(conn, opened.schema, first, last)
            )
        return {
            "trace": {**trace_summary(rows, waterfall), **preview},
            "findings": graph["findings"],
            "notes": graph["notes"],
            "waterfall_unplaced": waterfall["unplaced"],
            "node_count": len(graph["nodes"]),
            "edge_count": len(graph["edges"]),
        }

    name = f"/page|{rows.trace_id}|{rows.exchange}|None"
    return json.loads(await trace_cache.json_text(datasette, opened, name, build))


def prepare(datasette, opened: Opened, rows: TraceRows) -> None:
    """Build what the page's scripts will fetch (its tree, then its picture) while the
    browser loads the page, for this reader's policy (the task runs in a copy of the
    request's context). One build at a time per page and policy: the tree is wanted first,
    and two builds sharing the interpreter would each finish later."""
    key = _page_build(opened, rows)
    if key in _preparing:
        return

    async def run() -> None:
        for suffix in PAGE_FETCHES:
            try:
                await answer(datasette, opened, rows, suffix)
            except Exception:  # the request itself will meet (and report) the same problem
                log.info("preparing %s of trace %s failed", suffix, rows.trace_id, exc_info=True)
                return

    task = _preparing[key] = asyncio.ensure_future(run())
    task.add_done_callback(lambda _task: _preparing.pop(key, None))


async def after_earlier_fetches(opened: Opened, rows: TraceRows, suffix: str) -> None:
    """A fetch of the picture while the page's answers are being built waits for that build
    (which makes the tree first, then the picture), instead of building the picture at the
    same time as the tree the page draws first."""
    task = _preparing.get(_page_build(opened, rows))
    if task is not None and suffix in PAGE_FETCHES[1:]:
        await asyncio.shield(task)


async def conversation_answer(
    datasette, opened: Opened, rows: TraceRows, history: int | None
) -> dict[str, Any]:
    """conversation.json's answer: every step, or with `history` that step's repeated messages."""
    found = await conversation(datasette, opened, rows, history)
    if history is None:
        return found
    step = found["steps"][0]
    return {
        "session_id": found["session_id"],
        "trace_id": found["trace_id"],
        "step": history,
        "model_call": step["model_call"],
        "href": step["href"],
        "repeated": step["request"].get("repeated"),
        "messages": step["messages"],
    }


def _trace_id(request) -> str:
    trace_id = url_value(request, "trace_id")
    problem = bad_value(trace_id, "trace id")
    if problem:
        raise errors.bad_parameter("Bad trace id", problem)
    return trace_id


def _exchange(request) -> str | None:
    exchange = request.args.get("exchange")
    if exchange is not None and not exchange.isdigit():
        raise errors.bad_parameter("Bad exchange", "exchange must be a model call id (digits).")
    return exchange


async def _load(datasette, request) -> tuple[Opened, TraceRows]:
    opened = await open_session(datasette, request, need_ledger=True)
    trace_id, exchange = _trace_id(request), _exchange(request)
    return opened, await load_rows(datasette, opened, trace_id, exchange)


def _rows_key(opened: Opened, trace_id: str) -> tuple:
    return (opened.session.id, trace_id, None, "rows")


async def load_rows(
    datasette, opened: Opened, trace_id: str, exchange: str | None = None
) -> TraceRows:
    """The rows of one trace of an opened session (cached per ledger version); a 404
    `CapsemError` when no row carries the trace id."""
    schema = opened.schema

    async def compute() -> TraceRows:
        locator = await trace_locator(opened)  # a big ledger's map, read once per version
        return await opened.db.execute_fn(lambda conn: load_trace(conn, schema, trace_id, locator))

    entry, _ = await get_state(datasette).traces.get(
        _rows_key(opened, trace_id), validator(opened), compute
    )
    rows = entry.report
    if exchange is not None and not rows.empty:
        if int(exchange) not in {row["id"] for row in rows.model_calls}:
            raise errors.not_found(
                "Unknown exchange",
                f"Trace {trace_id!r} of session {opened.session.id} has no model call {exchange}.",
                [{"id": trace_id, "name": None, "href": opened.links.trace(trace_id)}],
            )
        rows = scope_to_exchange(copy.copy(rows), int(exchange))  # the cached rows stay whole
    if rows.empty:
        session = opened.session
        raise errors.not_found(
            "Unknown trace",
            f"No row of session {session.id} carries the trace id {trace_id!r}.",
            [{"id": session.id, "name": session.display_name, "href": opened.links.session()}],
        )
    if hides_free_text():
        rows = without_free_text(rows)  # the cached rows stay whole
    return rows


def hides_free_text() -> bool:
    """Whether the current reader sees no free text (`hide_free_text`, no view_secrets)."""
    return redaction.policy.get() != redaction.OPEN and redaction.hide_free_text.get()


async def node_detail(datasette, request):
    """`…/node.json?id=table:row`: one row of this trace in full, for the detail panel."""
    opened = await open_session(datasette, request, need_ledger=True)
    trace_id = _trace_id(request)
    wanted = request.args.get("id") or ""
    parsed = parse_node_id(wanted)
    if parsed is None:
        raise errors.bad_parameter("Bad node id", "id must be a row node: TABLE:ROW_ID.")
    table, row_id = parsed
    schema = opened.schema
    detail = await opened.db.execute_fn(lambda conn: load_node(conn, schema, table, row_id))
    if detail is None:
        raise errors.not_found("Unknown row", f"No {table} row {row_id} in this ledger.")
    detail["cells"] = redaction.project_row("ledger", table, detail["cells"])
    links = opened.links
    detail["row"] = links.row(table, row_id)
    if detail.get("event_id") and table != "event_body_blobs":
        detail["event"] = links.event(str(detail["event_id"]))
    for body in detail["bodies"]:
        if body.get("event_id") and body.get("id") is not None:
            body_links(links, str(body["event_id"]), body)
    detail["node"] = wanted
    detail["in_trace"] = detail.get("trace_id") in (None, trace_id)
    if table == "model_calls":
        detail["chat"] = await _call_chat(
            datasette, opened, str(detail.get("trace_id") or ""), row_id
        )
    return render.json_response(detail)


async def _call_chat(datasette, opened: Opened, trace_id: str, row_id: int) -> dict | None:
    """One model call read as chat for the detail panel: its request's messages by role (the
    last `PANEL_MESSAGES`, with the system prompt), its reply, its model parameters, and its
    step in the conversation of its trace (a link). The same reading as conversation.json
    (graph/conversation.py), for one call."""
    schema = opened.schema
    calls = await opened.db.execute_fn(lambda conn: load_conversation(conn, schema, [row_id]))
    if not calls:
        return None
    step = build_steps(calls)[0]
    links, rows = opened.links, None
    if trace_id and not bad_value(trace_id, "trace id"):
        try:
            rows = await load_rows(datasette, opened, trace_id)
        except errors.CapsemError:
            rows = None
    messages = step["messages"]
    system = [m for m in messages if m["role"] == "system"]
    rest = [m for m in messages if m["role"] != "system"]
    shown = system + rest[-PANEL_MESSAGES:]
    for part in shown + step["reply"]:
        part.pop("new", None)
        part.pop("rewrites", None)
    chat = {
        "format": step["format"],
        "parameters": step["parameters"],
        "messages": shown,
        "earlier": len(rest) - len(rest[-PANEL_MESSAGES:]),
        "reply": step["reply"],
        "request": step["request"],
        "response": step["response"],
        "stop_reason": step["stop_reason"] or step["reply_stop"],
        "href": links.row("model_calls", row_id),
    }
    _link_parts([chat], links, rows)
    if rows is not None:
        order = sorted(rows.model_calls, key=lambda r: (str(r.get("timestamp") or ""), r["id"]))
        ids = [r["id"] for r in order]
        if row_id in ids:
            if is_ambient(trace_id):
                chat["step"] = 1
                page = links.exchange(trace_id, row_id)
            else:
                chat["step"] = ids.index(row_id) + 1
                page = links.trace(trace_id)
            chat["conversation"] = f"{page}#conversation-step-{chat['step']}"
    return chat


def _link_parts(steps: list[dict], links, rows: TraceRows | None) -> None:
    """Link each tool call and result of `steps` to its row (a call id in a body names a
    tool_calls row and a tool_responses row of the trace)."""
    rows_of: dict[str, dict[str, Any]] = {
        kind: {str(r["call_id"]): r["id"] for r in table if r.get("call_id") is not None}
        for kind, table in (
            ("tool_calls", rows.tool_calls if rows else []),
            ("tool_responses", rows.tool_responses if rows else []),
        )
    }
    for step in steps:
        for part in step["messages"] + step["reply"]:
            table = {"tool_call": "tool_calls", "tool_result": "tool_responses"}.get(part["type"])
            row_id = rows_of[table].get(part.get("call_id")) if table else None
            if row_id is not None:
                part["row"] = f"{table}:{row_id}"
                part["href"] = links.row(table, row_id)
        for side in (step["request"], step["response"]):
            if side.get("blob_id") is not None:
                side["page"] = links.body(str(side["event_id"]), side["blob_id"])
                side["href"] = links.body(str(side["event_id"]), side["blob_id"], ".json")
            elif side.get("source") and step.get("href"):
                side["page"] = step["href"]


def _history_step(request, model_calls: int) -> int | None:
    """`?step=N` of conversation.json: the step whose repeated history is asked for."""
    raw = request.args.get("step")
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 9 or int(raw) < 1:
        raise errors.bad_parameter("Bad step", "step must be a step number (1, 2, …).")
    if int(raw) > model_calls:
        raise errors.not_found("Unknown step", f"This trace has {model_calls} model calls.")
    return int(raw)


async def conversation(
    datasette, opened: Opened, rows: TraceRows, history: int | None = None
) -> dict[str, Any]:
    """conversation.json: the turn as chat, one step per model call (graph/conversation.py).
    With `history` (a step number), only that step's repeated messages (`?step=N`): what its
    request sent again, for the page's "N earlier messages repeated" to unfold."""
    schema = opened.schema
    ids = [row["id"] for row in rows.model_calls]
    if history is not None:
        ids = ids[:history]  # the steps before it decide what it repeats
    calls = await opened.db.execute_fn(lambda conn: load_conversation(conn, schema, ids))
    steps = build_steps(calls, history=history is not None)
    links = opened.links
    if history is not None:
        steps = steps[-1:]
        steps[0]["messages"], steps[0]["reply"] = steps[0].pop("history"), []
    for step in steps:
        step.pop("history", None)
        step["path"] = redaction.viewer_free_text(step.get("path"))  # model_calls.path
        step["href"] = links.row("model_calls", step["model_call_id"])
    _link_parts(steps, links, rows)
    return {
        "session_id": opened.session.id,
        "trace_id": rows.trace_id,
        "exchange": rows.exchange,
        "model_calls": len(rows.model_calls),
        "steps": steps,
        "formats": sorted({s["format"] for s in steps if s["format"]}),
    }


async def trace_page(datasette, request):
    suffix = request.url_vars.get("suffix") or ""
    if suffix == "/node.json":  # one row, without loading the whole trace
        return await node_detail(datasette, request)
    if suffix == "":
        return await html_page(datasette, request)
    if suffix == ".otlp.json":  # a download: waited for
        opened, rows = await _load(datasette, request)
        return render.json_response(
            export_trace(rows, opened.session.id), filename="trace.otlp.json"
        )
    opened = await open_session(datasette, request, need_ledger=True)
    trace_id, exchange = _trace_id(request), _exchange(request)
    rows = rows_held(datasette, opened, trace_id)
    verdicts = suffix == "/conversation.json" or row_verdicts_held(datasette, opened)
    held = rows is not None and (rows.empty or verdicts)
    found = await pending.within_wait(
        opened, json_answer(datasette, request, opened, trace_id, exchange, suffix), held
    )
    if pending.pending(found):  # a big ledger's trace rows or rule book verdicts, not held
        return await pending.page(
            datasette, request, opened, _pending_what(datasette, opened), "Trace", trace_id=trace_id
        )
    return found


async def json_answer(
    datasette, request, opened: Opened, trace_id: str, exchange: str | None, suffix: str
):
    """The answer of one of the trace's JSON suffixes but `.otlp.json` and `/node.json`."""
    rows = await load_rows(datasette, opened, trace_id, exchange)
    links, session = opened.links, opened.session
    if suffix in JSON_ANSWERS:
        history = None
        if suffix == "/conversation.json":
            history = _history_step(request, len(rows.model_calls))
        await after_earlier_fetches(opened, rows, suffix)
        text = await answer(datasette, opened, rows, suffix, history)
        return render.json_text_response(text)
    # ".json", the route's last suffix
    graph = {**await cached_graph(datasette, opened, rows), "session_id": session.id}
    waterfall = waterfall_rows(rows, links)
    summary = trace_summary(rows, waterfall)
    return render.json_response(
        {"session": session.summary(), "trace": summary, "graph": graph, "waterfall": waterfall}
    )


def _pending_what(datasette, opened: Opened) -> str:
    """What a big ledger's trace page or JSON waits for, said on its 202 page."""
    if row_verdicts_held(datasette, opened):
        return (
            "The trace's rows are being read (the first trace of this version of the file "
            "also reads the map of the ledger's columns without an index)"
        )
    return "The rule book is checking the rows of this session for its trace pages"


def rows_held(datasette, opened: Opened, trace_id: str) -> TraceRows | None:
    """The trace's rows if they are in memory for the file as it is now."""
    entry = get_state(datasette).traces.fresh(_rows_key(opened, trace_id), validator(opened))
    return entry.report if entry is not None else None


async def html_page(datasette, request):
    """The trace page's HTML. On a big ledger, what it waits for (the trace's rows, read
    through the trace-id indexes: seconds on a file the OS no longer caches; the rule book's
    row verdicts of the whole file, on a cold store) is decided before any of it is read: held,
    or answered within `pending.WAIT_SECONDS`, or a 202 "being computed" page at once while the
    rows and verdicts are read in the background (an unknown trace is then a 404 on reload)."""
    opened = await open_session(datasette, request, need_ledger=True)
    trace_id, exchange = _trace_id(request), _exchange(request)

    async def rows_and_facts() -> tuple[TraceRows, dict[str, Any]]:
        rows = await load_rows(datasette, opened, trace_id, exchange)
        return rows, await page_facts(datasette, opened, rows)

    rows = rows_held(datasette, opened, trace_id)  # none at all: a 404 at once
    held = rows is not None and (rows.empty or row_verdicts_held(datasette, opened))
    found = await pending.within_wait(opened, rows_and_facts(), held)
    if pending.pending(found):  # a big ledger's trace rows or rule book verdicts, not held
        what = _pending_what(datasette, opened)
        return await pending.page(datasette, request, opened, what, "Trace", trace_id=trace_id)
    rows, facts = found
    links, session = opened.links, opened.session
    context = {
        "session": session.summary(),
        "display_name": session.display_name,
        "trace": facts["trace"],
        "findings": facts["findings"],
        "notes": facts["notes"],
        "waterfall_unplaced": facts["waterfall_unplaced"],
        "finding_nodes": FINDING_NODES,
        "node_count": facts["node_count"],
        "edge_count": facts["edge_count"],
        "links": {
            "session": links.session(),
            "trace_page": links.trace(rows.trace_id),
            "graph": _scoped(links, rows, "/graph.json"),
            "picture": _scoped(links, rows, "/picture.json"),
            "tree": _scoped(links, rows, "/tree.json"),
            "conversation": _scoped(links, rows, "/conversation.json"),
            "node": links.trace(rows.trace_id, "/node.json"),
            "json": _scoped(links, rows, ".json"),
            "otlp": _scoped(links, rows, ".otlp.json"),
            "compare": Urls.of(datasette).plugin("/compare"),
        },
        "turn": f"{session.id}:{rows.trace_id}",
    }
    context["follow"] = await follow_context(datasette, opened, str(rows.trace_id))
    response = await render.page(datasette, request, "trace.html", context)
    if not render.wants_json(request):
        prepare(datasette, opened, rows)
    return response


ROUTES = [
    (
        r"^/-/capsem/sessions/(?P<session_id>[^/]+)/traces/(?P<trace_id>[^/]+?)"
        r"(?P<suffix>\.otlp\.json|\.json|/graph\.json|/picture\.json|/tree\.json|/node\.json"
        r"|/conversation\.json)?$",
        trace_page,
    ),
]
