"""`/-/capsem/compare?a=SESSION:TRACE&b=SESSION:TRACE` (and `.json`): two turns side by side.

The turns may be of one session or of two. Both sessions are opened (the actor's right to view
each is checked, and a session the actor may not view answers exactly as an unknown one)
before any trace is read; what is compared is `session/compare.py`'s.
"""

from __future__ import annotations

from typing import Any

from datasette_capsem import errors
from datasette_capsem.session.compare import compare, load_arguments, turn_steps
from datasette_capsem.urls import Urls
from datasette_capsem.views import render
from datasette_capsem.views.opening import Opened, bad_value, open_session_id
from datasette_capsem.views.trace import load_rows

USAGE = "Give two turns as a=SESSION_ID:TRACE_ID and b=SESSION_ID:TRACE_ID."


def _turn(request, name: str) -> tuple[str, str]:
    value = request.args.get(name)
    if value is None or value == "":
        raise errors.bad_parameter(f"Missing {name}", f"No {name}= turn. {USAGE}")
    session_id, sep, trace_id = value.partition(":")
    if not sep or not session_id or not trace_id:
        raise errors.bad_parameter(
            f"Bad {name}", f"{name}= must be SESSION_ID:TRACE_ID, not {value[:80]!r}. {USAGE}"
        )
    for part, what in ((session_id, "session id"), (trace_id, "trace id")):
        problem = bad_value(part, what)
        if problem:
            raise errors.bad_parameter(f"Bad {name}", f"{name}=: {problem}")
    return session_id, trace_id


async def _side(datasette, opened: Opened, trace_id: str) -> dict[str, Any]:
    rows = await load_rows(datasette, opened, trace_id)
    schema = opened.schema
    ids = [row["id"] for row in rows.tool_calls]
    arguments = await opened.db.execute_fn(lambda conn: load_arguments(conn, schema, ids))
    turn = turn_steps(rows, arguments)
    links = opened.links
    for step in turn["steps"]:
        step["href"] = links.row("model_calls", step["model_call_id"])
    for tool in turn["tools"]:
        tool["href"] = links.row("tool_calls", tool["tool_call_id"])
    turn.update(
        session_id=opened.session.id,
        session_name=opened.session.display_name,
        trace_id=trace_id,
        session_href=links.session(),
        trace_href=links.trace(trace_id),
    )
    return turn


async def compare_page(datasette, request):
    (a_session, a_trace), (b_session, b_trace) = _turn(request, "a"), _turn(request, "b")
    opened_a = await open_session_id(datasette, request, a_session, need_ledger=True, by_name=False)
    opened_b = await open_session_id(datasette, request, b_session, need_ledger=True, by_name=False)
    a = await _side(datasette, opened_a, a_trace)
    b = await _side(datasette, opened_b, b_trace)
    result = compare(a, b)
    urls = Urls.of(datasette)
    data = {
        "a": {k: v for k, v in a.items() if k != "tools"},
        "b": {k: v for k, v in b.items() if k != "tools"},
        **result,
        "links": {
            "json": urls.compare(f"{a_session}:{a_trace}", f"{b_session}:{b_trace}", ".json"),
            "swapped": urls.compare(f"{b_session}:{b_trace}", f"{a_session}:{a_trace}"),
        },
    }
    return await render.page(datasette, request, "compare.html", data)


ROUTES = [(r"^/-/capsem/compare(?P<format>\.json)?$", compare_page)]
