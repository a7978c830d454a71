"""`/-/capsem/compare?a=SESSION:TRACE&b=SESSION:TRACE` (and `.json`): two turns side by side.

The turns may be of one session or of two. A turn is `SESSION_ID:TRACE_ID`, or a bare trace
id, whose session is looked up where the id occurs (the index, and a scan of the ledgers it
does not cover; several sessions carrying it is a 409 naming them). The session page's turn
list sends the turns it ticked as `turn=…&turn=…`. Without two turns the page is a form: two
boxes, and with one turn given a chooser of the other turns of its session or of another
session (`other=ID_OR_NAME`; not `session=`, which the credential masker reads as a token); the JSON still answers 400 (it is a comparison or nothing).

Both sessions are opened (the actor's right to view each is checked, and a session the actor
may not view answers exactly as an unknown one) before any trace is read; what is compared is
`session/compare.py`'s.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from datasette_capsem import errors, permissions
from datasette_capsem.catalog.resolve import resolve_name
from datasette_capsem.session.compare import compare, load_arguments, turn_steps
from datasette_capsem.session.overview import traces_page
from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import render
from datasette_capsem.views.opening import Opened, bad_value, links_for, open_session_id
from datasette_capsem.views.search import id_hits
from datasette_capsem.views.trace import load_rows

USAGE = "Give two turns as a=SESSION_ID:TRACE_ID and b=SESSION_ID:TRACE_ID (or bare trace ids)."
CHOOSER_TURNS = 50  # turns of one session offered by the chooser
CHOOSER_SESSIONS = 20  # other sessions offered by the chooser, newest first
TRACE_KINDS = ("trace_id", "turn_id")


def _turn_value(value: str, name: str) -> tuple[str | None, str]:
    """(session id or None for a bare trace id, trace id) of one `a`/`b` value."""
    session_id, sep, trace_id = value.partition(":")
    if not sep:
        session_id, trace_id = None, value
    if sep and (not session_id or not trace_id):
        raise errors.bad_parameter(
            f"Bad {name}", f"{name}= must be SESSION_ID:TRACE_ID, not {value[:80]!r}. {USAGE}"
        )
    for part, what in ((session_id, "session id"), (trace_id, "trace id")):
        problem = bad_value(part, what) if part is not None else None
        if problem:
            raise errors.bad_parameter(f"Bad {name}", f"{name}=: {problem}")
    return session_id, trace_id


async def _session_of_trace(datasette, request, name: str, trace_id: str) -> str:
    """The one session (the actor may view) whose rows carry `trace_id`; a 404 when none
    does, a 409 naming the candidates when several do. A fork's copy of its parent's rows
    is the parent's turn."""
    hits, _covered, _problem, _report = await id_hits(datasette, request, trace_id)
    hits = [h for h in hits if h.get("id_kind") in TRACE_KINDS]
    own = [h for h in hits if not h.get("copied_from")] or hits
    sessions = list(dict.fromkeys(h["session_id"] for h in own))
    if not sessions:
        raise errors.not_found(
            "Unknown trace",
            f"{name}=: no session has a turn with the trace id {trace_id!r}. {USAGE}",
        )
    if len(sessions) > 1:
        catalog = get_state(datasette).catalog
        urls = Urls.of(datasette)
        suggestions = []
        for session_id in sessions:
            session = catalog.get(session_id)
            suggestions.append(
                {
                    "id": f"{session_id}:{trace_id}",
                    "name": session.display_name if session else None,
                    "href": links_for(datasette, session).trace(trace_id)
                    if session
                    else urls.session(session_id),
                }
            )
        raise errors.CapsemError(
            409,
            "Ambiguous trace id",
            f"{name}=: the trace id {trace_id!r} is in {len(sessions)} sessions "
            f"({', '.join(sessions)}); give it as SESSION_ID:TRACE_ID.",
            suggestions,
        )
    return sessions[0]


async def _turn(datasette, request, name: str, value: str) -> tuple[str, str]:
    session_id, trace_id = _turn_value(value, name)
    if session_id is None:
        session_id = await _session_of_trace(datasette, request, name, trace_id)
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


def _given(request) -> tuple[str | None, str | None, int]:
    """(a, b, how many turns were ticked) of a request: `a`/`b`, or the `turn` values the
    session page's turn list sends (exactly two make a comparison)."""
    a, b = request.args.get("a") or None, request.args.get("b") or None
    ticked = [t for t in request.args.getlist("turn") if t]
    if ticked and a is None:
        a = ticked[0]
        ticked = ticked[1:]
    if ticked and b is None:
        b = ticked[0]
        ticked = ticked[1:]
    return a, b, len(ticked)


async def _turns_of(datasette, request, session_id: str, *, skip: str | None) -> dict[str, Any]:
    """One session's turns (newest first) for the chooser (`session_id`: an id, or a name
    one session has), each with its compare link."""
    resolution = resolve_name(get_state(datasette).catalog, session_id)
    opened = await open_session_id(
        datasette, request, resolution.id or session_id, need_ledger=True, by_name=False
    )
    page = await opened.db.execute_fn(
        lambda conn: traces_page(conn, opened.schema, 0, CHOOSER_TURNS)
    )
    turns = []
    for trace in page["traces"]:
        trace_id = str(trace["trace_id"])
        if trace.get("exchange") is not None or trace_id == skip:
            continue
        turns.append(
            {
                "value": f"{opened.session.id}:{trace_id}",
                "trace_id": trace_id,
                "href": opened.links.trace(trace_id),
                **{
                    k: trace.get(k)
                    for k in ("start", "model_calls", "tool_calls", "final_stop_reason")
                },
            }
        )
    return {
        "id": opened.session.id,
        "name": opened.session.display_name,
        "href": opened.links.session(),
        "turns": turns,
        "more": page["total"] > CHOOSER_TURNS,
    }


async def _other_sessions(datasette, request, skip: str) -> list[dict[str, Any]]:
    """The newest sessions with a ledger the actor may view, for 'another session'."""
    catalog = get_state(datasette).catalog
    sessions = sorted(
        (s for s in catalog.snapshot().sessions.values() if s.has_ledger and s.id != skip),
        key=lambda s: (s.created_at or "", s.id),
        reverse=True,
    )
    found = []
    for session in sessions:
        links = links_for(datasette, session)
        if await permissions.can_view_database(datasette, request.actor, links.database):
            found.append(
                {"id": session.id, "name": session.display_name, "created_at": session.created_at}
            )
        if len(found) >= CHOOSER_SESSIONS:
            break
    return found


async def _form(datasette, request, a: str | None, b: str | None, extra: int):
    """The page without two turns: a form, and with one turn a chooser of the other."""
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    urls = Urls.of(datasette)
    context: dict[str, Any] = {
        "form": True,
        "a": a or b,
        "extra": extra,
        "this": None,
        "other": None,
        "sessions": [],
        "chosen": None,
        "action": urls.plugin("/compare"),
    }
    given = a or b
    if given:
        session_id, trace_id = await _turn(datasette, request, "a" if a else "b", given)
        value = f"{session_id}:{trace_id}"
        context["a"] = value
        this = await _turns_of(datasette, request, session_id, skip=trace_id)
        for turn in this["turns"]:
            turn["compare"] = urls.compare(value, turn["value"])
        context["this"] = this
        chosen = request.args.get("other") or None
        if chosen and chosen != session_id:
            other = await _turns_of(datasette, request, chosen, skip=None)
            for turn in other["turns"]:
                turn["compare"] = urls.compare(value, turn["value"])
            context["other"] = other
        context["chosen"] = chosen
        context["sessions"] = [
            {
                **s,
                "href": urls.plugin("/compare") + "?" + urlencode({"a": value, "other": s["id"]}),
            }
            for s in await _other_sessions(datasette, request, session_id)
        ]
    return await render.page(datasette, request, "compare_form.html", context)


async def compare_page(datasette, request):
    a_value, b_value, extra = _given(request)
    if a_value is None or b_value is None or extra:
        if render.wants_json(request) or extra:
            if extra:
                raise errors.bad_parameter(
                    "Too many turns", f"{extra + 2} turns were given; compare takes two. {USAGE}"
                )
            missing = "a" if a_value is None else "b"
            raise errors.bad_parameter(f"Missing {missing}", f"No {missing}= turn. {USAGE}")
        return await _form(datasette, request, a_value, b_value, extra)
    a_session, a_trace = await _turn(datasette, request, "a", a_value)
    b_session, b_trace = await _turn(datasette, request, "b", b_value)
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
            "change_b": urls.plugin("/compare") + "?" + urlencode({"a": f"{a_session}:{a_trace}"}),
        },
    }
    return await render.page(datasette, request, "compare.html", data)


ROUTES = [(r"^/-/capsem/compare(?P<format>\.json)?$", compare_page)]
