"""`/-/capsem/sessions/<id>/events/<event_id>`: the row an event id names, its security rows
and its request/response bodies; `.../bodies/<blob id>` serves one body (decoded, as JSON for
the page's lazy loader, or raw to readers allowed to see secrets).
"""

from __future__ import annotations

from typing import Any

from datasette.utils.asgi import Response

from datasette_capsem import errors, redaction
from datasette_capsem.errors import CapsemError
from datasette_capsem.graph.events import load_body, load_event, raw_body
from datasette_capsem.views import render
from datasette_capsem.views.session import bad_value, open_session, url_value

MAX_EVENT_ID_CHARS = 64
MAX_BLOB_ID_DIGITS = 18


def _row_links(opened, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        row["href"] = opened.links.row(row["table"], row["row_id"])
        trace_id = row["cells"].get("trace_id")
        row["trace_href"] = opened.links.trace(str(trace_id)) if trace_id else None
    return rows


async def _opened_event(datasette, request):
    opened = await open_session(datasette, request, need_ledger=True)
    event_id = url_value(request, "event_id")
    problem = bad_value(event_id, "event id", MAX_EVENT_ID_CHARS)
    if problem:
        raise errors.bad_parameter("Bad event id", problem)
    return opened, event_id


async def event_page(datasette, request):
    opened, event_id = await _opened_event(datasette, request)
    schema = opened.schema
    back = [{"id": opened.session.id, "href": opened.links.session()}]
    if not any(schema.has(t, "event_id") for t in ("model_calls", "net_events", "tool_calls")):
        raise errors.not_found(
            "No event ids in this ledger",
            f"Session {opened.session.id}'s ledger predates event ids (2026-06-06); its rows "
            "have no event page. Browse them from the session page.",
            back,
        )
    event = await opened.db.execute_fn(lambda conn: load_event(conn, schema, event_id))
    if not (event["rows"] or event["security"] or event["bodies"]):
        raise errors.not_found(
            "Unknown event",
            f"No row of session {opened.session.id} carries the event id {event_id!r}.",
            back,
        )
    for body in event["bodies"]:
        body["href"] = opened.links.body(event_id, body["id"], ".json")
        body["page"] = opened.links.body(event_id, body["id"])
        body["raw"] = opened.links.body(event_id, body["id"], "/raw")
    context = {
        "session": opened.session.summary(),
        "event_id": event_id,
        "rows": _row_links(opened, event["rows"]),
        "security": _row_links(opened, event["security"]),
        "bodies": event["bodies"],
        "notes": _notes(event),
        "links": {"session": opened.links.session()},
        "raw_allowed": redaction.policy.get() == redaction.OPEN,
    }
    return await render.page(datasette, request, "event.html", context)


def _notes(event: dict[str, Any]) -> list[str]:
    notes = []
    if len(event["rows"]) > 1:
        notes.append(
            f"{len(event['rows'])} rows share this event id; an event id should name exactly "
            "one row (integrity check 1)."
        )
    if not event["rows"]:
        notes.append(
            "No ledger row carries this event id. For MCP protocol chatter (tools/list, "
            "initialize) that is expected; otherwise the security row or blob is dangling."
        )
    return notes


async def body_page(datasette, request):
    opened, event_id = await _opened_event(datasette, request)
    raw_blob_id = url_value(request, "blob_id")
    if not raw_blob_id.isdigit() or len(raw_blob_id) > MAX_BLOB_ID_DIGITS:
        raise errors.bad_parameter("Bad body id", "Body ids are integers.")
    blob_id = int(raw_blob_id)
    suffix = request.url_vars.get("suffix") or ""
    if suffix == "/raw":
        return await _raw(datasette, request, opened, event_id, blob_id)
    body = await opened.db.execute_fn(lambda conn: load_body(conn, blob_id))
    if body is None or body.get("event_id") != event_id:
        raise _no_body(event_id, blob_id)
    body["raw"] = opened.links.body(event_id, blob_id, "/raw")
    body["event_href"] = opened.links.event(event_id)
    if suffix == ".json":
        return render.json_response(body)
    context = {
        "session": opened.session.summary(),
        "event_id": event_id,
        "body": body,
        "links": {"session": opened.links.session(), "event": opened.links.event(event_id)},
        "raw_allowed": redaction.policy.get() == redaction.OPEN,
    }
    return await render.page(datasette, request, "body.html", context)


def _no_body(event_id: str, blob_id: int) -> CapsemError:
    return errors.not_found(
        "Unknown body", f"No body blob {blob_id} belongs to event {event_id!r}."
    )


async def _raw(datasette, request, opened, event_id: str, blob_id: int) -> Response:
    """The stored bytes as a download: never rendered, never sniffed."""
    if redaction.policy.get() != redaction.OPEN:
        raise CapsemError(
            403,
            "Raw download refused",
            "Raw bodies cannot be masked; they need the capsem-view-secrets permission.",
        )
    found = await opened.db.execute_fn(lambda conn: _raw_checked(conn, blob_id, event_id))
    if found is None:
        raise _no_body(event_id, blob_id)
    return Response(
        found,
        content_type="application/octet-stream",
        headers={
            "content-disposition": f'attachment; filename="body-{blob_id}.bin"',
            "x-content-type-options": "nosniff",
        },
    )


def _raw_checked(conn, blob_id: int, event_id: str) -> bytes | None:
    found = raw_body(conn, blob_id)
    if found is None or found["event_id"] != event_id:
        return None
    return found["body"]


ROUTES = [
    (
        r"^/-/capsem/sessions/(?P<session_id>[^/]+)/events/(?P<event_id>[^/]+)"
        r"/bodies/(?P<blob_id>[^/]+?)(?P<suffix>\.json|/raw)?$",
        body_page,
    ),
    (
        r"^/-/capsem/sessions/(?P<session_id>[^/]+)/events/(?P<event_id>[^/]+?)"
        r"(?P<format>\.json)?$",
        event_page,
    ),
]
