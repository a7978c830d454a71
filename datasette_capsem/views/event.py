"""`/-/capsem/sessions/<id>/events/<event_id>`: the row an event id names, its security rows
and its request/response bodies; `.../bodies/<blob id>` serves one body (decoded, as JSON for
the page's lazy loader, or raw to readers allowed to see secrets).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import weakref
from typing import Any

from datasette.utils.asgi import Response

from datasette_capsem import errors, redaction
from datasette_capsem.core_pages import secrets_guard
from datasette_capsem.errors import CapsemError, Redirect
from datasette_capsem.graph.bodies import DISPLAY_BYTES, image_type
from datasette_capsem.graph.events import (
    EventLocator,
    body_chunk,
    body_meta,
    load_body,
    load_event,
    locate_events,
    raw_body,
)
from datasette_capsem.readonly import file_fingerprint
from datasette_capsem.session import relations
from datasette_capsem.views import pending, render
from datasette_capsem.views.integrity import big_ledger, on_ledger
from datasette_capsem.views.opening import bad_value, open_session, url_value

MAX_EVENT_ID_CHARS = 64
MAX_BLOB_ID_DIGITS = 18
CHUNK_BYTES = 256 * 1024  # a download is streamed in slices of this size
EXTENSIONS = {
    "application/json": "json",
    "text/event-stream": "sse",
    "text/plain": "txt",
    "application/x-ndjson": "ndjson",
    "text/html": "html.txt",
}

log = logging.getLogger(__name__)


def body_links(links, event_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """The URLs of one body: its page, its JSON, its full download (masked as the reader's
    permissions require) and, for readers who may see secrets, the stored bytes."""
    blob_id = body["id"]
    body["href"] = links.body(event_id, blob_id, ".json")
    body["page"] = links.body(event_id, blob_id)
    body["raw"] = links.body(event_id, blob_id, "/raw")
    body["download"] = links.body(event_id, blob_id, "/download")
    body["download_masked"] = redaction.policy.get() != redaction.OPEN
    body["display_limit"] = DISPLAY_BYTES
    return body


def _event_or_row(links, table: str, row_id: Any, event_id: Any) -> str:
    event = relations.usable_event_id(event_id)
    return links.event(event) if event else links.ledger_row(table, row_id)


def _relations(
    opened, conn, rows: list[dict[str, Any]], locator: EventLocator | None = None
) -> list[dict[str, Any]]:
    """Each row's links to the rows its ids join (session/relations.py), as labelled links
    (a big ledger's pairs across traces from its `locator`, read once per file version)."""
    links, schema = opened.links, opened.schema
    for row in rows:
        cells, found = row["cells"], []
        if row["table"] == "model_calls" and row["row_id"] is not None:
            related = relations.model_call_relations(conn, schema, row["row_id"])
            for call in related["emitted"]:
                found.append(
                    {
                        "label": "emitted tool call",
                        "text": call["call_id"],
                        "detail": call["tool_name"],
                        "href": _event_or_row(links, "tool_calls", call["id"], call["event_id"]),
                    }
                )
            for response in related["carried"]:
                found.append(
                    {
                        "label": "carried the response",
                        "text": response["call_id"],
                        "detail": f"tool_responses {response['id']}",
                        "href": links.row("tool_responses", response["id"]),
                    }
                )
                found.append(
                    {
                        "label": "… answering the call",
                        "text": response["call_id"],
                        "detail": None,
                        "href": links.tool_call(
                            response["call_id"], response["trace_id"], row["row_id"]
                        ),
                    }
                )
        elif row["table"] == "tool_calls":
            elsewhere = locator.elsewhere if locator is not None and locator.current else None
            related = relations.tool_call_relations(conn, schema, cells, elsewhere)
            parent = related["emitted_by"]
            if parent is not None:
                found.append(
                    {
                        "label": "emitted by model call",
                        "text": str(parent["id"]),
                        "detail": "missing" if parent.get("missing") else None,
                        "href": _event_or_row(
                            links, "model_calls", parent["id"], parent["event_id"]
                        ),
                    }
                )
            for response in related["answered_by"]:
                found.append(
                    {
                        "label": "answered by",
                        "text": f"tool_responses {response['id']}",
                        "detail": None,
                        "href": links.row("tool_responses", response["id"]),
                    }
                )
                found.append(
                    {
                        "label": "consumed by model call",
                        "text": str(response["model_call_id"]),
                        "detail": None,
                        "href": _event_or_row(
                            links,
                            "model_calls",
                            response["model_call_id"],
                            response["model_event_id"],
                        ),
                    }
                )
            for pair in related["answered_elsewhere"]:  # the writer's split (spec §4.4)
                found.append(
                    {
                        "label": "answered in trace",
                        "text": str(pair["trace_id"]),
                        "detail": pair["reason"],
                        "href": links.trace(str(pair["trace_id"])),
                    }
                )
                found.append(
                    {
                        "label": "answered by",
                        "text": f"tool_responses {pair['id']}",
                        "detail": None,
                        "href": links.row("tool_responses", pair["id"]),
                    }
                )
            if not related["answered_by"] and not related["answered_elsewhere"]:
                found.append(
                    {
                        "label": "answered by",
                        "text": "no response in this session",
                        "detail": None,
                        "href": None,
                    }
                )
        row["relations"] = found
    return rows


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


# A big ledger's event id map (graph/events.EventLocator) per mounted file: its fingerprint,
# the run reading it, and the last map read (of an earlier version, while the next is read).
# Dropped with the mounted file.
_LOCATORS: weakref.WeakKeyDictionary[Any, tuple[tuple, asyncio.Future, EventLocator | None]] = (
    weakref.WeakKeyDictionary()
)


def _done(task: asyncio.Future) -> EventLocator | None:
    if task.done() and not task.cancelled() and task.exception() is None:
        return task.result()
    return None


def locator_task(opened) -> tuple[asyncio.Future, EventLocator | None]:
    """The run reading a big ledger's event id map for the file as it is now (started once
    per file version, on a connection of its own), and the map read last (None before one
    was), which may be of an earlier version of the file."""
    db = opened.db
    fingerprint = file_fingerprint(db.source_path)
    held = _LOCATORS.get(db)
    last = None
    if held is not None:
        last = _done(held[1]) or held[2]
        if held[0] == fingerprint and (not held[1].done() or _done(held[1]) is not None):
            return held[1], last
    schema = opened.schema
    task = asyncio.ensure_future(on_ledger(opened, lambda conn: locate_events(conn, schema)))
    _LOCATORS[db] = (fingerprint, task, last)
    return task, last


async def trace_locator(opened) -> EventLocator | None:
    """A big ledger's map of the file as it is now, for `load_trace` (None for a smaller
    ledger, or when the map could not be read). The first map of a mounted file is waited
    for while it is read (started here): it reads once the tables a trace's lookups would
    otherwise read whole for every trace (`model_items` by model call id, the security
    tables by trace id, the event id uses), and each later trace of the version finds its
    rows by index or row id. While a changed file's map is read (a live ledger's, changing
    every second), a trace is read without one, as a smaller ledger's: an earlier version's
    map may miss a row changed since, and waiting for each version's map would hold every
    view of a live ledger."""
    if opened.db is None or not big_ledger(opened):
        return None
    task, last = locator_task(opened)
    if _done(task) is None and last is not None:
        return None
    try:
        return await asyncio.shield(task)
    except Exception:  # logged where it is read; the trace is read without it
        log.warning("a big ledger's map could not be read", exc_info=True)
        return None


async def _locator(opened) -> EventLocator | None | object:
    """A big ledger's event id map (None for a smaller ledger: its tables are read as they
    are), or what `pending.pending` recognises while the first is read. While the map of a
    changed file is read, the last one serves (it finds the rows written since by id)."""
    if not big_ledger(opened):
        return None
    task, last = locator_task(opened)
    current = _done(task)
    if current is not None:
        return current
    if last is not None:
        stale = copy.copy(last)
        stale.current = False
        return stale
    return await pending.within_wait(opened, asyncio.shield(task))


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

    locator = await _locator(opened)
    if pending.pending(locator):
        what = (
            "The ledger's event ids are being read (with the trace ids and model call ids "
            "of its tables without an index on them, and the tool results answered in "
            "another trace), once for this version of the file"
        )
        return await pending.page(datasette, request, opened, what, "Event")

    def read(conn):
        found = load_event(conn, schema, event_id, locator)
        _relations(opened, conn, found["rows"], locator)
        return found

    event = await opened.db.execute_fn(read)
    if not (event["rows"] or event["security"] or event["bodies"]):
        raise errors.not_found(
            "Unknown event",
            f"No row of session {opened.session.id} carries the event id {event_id!r}.",
            back,
        )
    for row in event["rows"] + event["security"]:  # each column as this actor sees it
        row["cells"] = redaction.project_row("ledger", row["table"], row["cells"])
        if row.get("json"):
            row["json"] = redaction.project_row("ledger", row["table"], row["json"])
    for body in event["bodies"]:
        body_links(opened.links, event_id, body)
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
    if "event_body_blobs" not in opened.schema.tables:  # an era that kept no bodies
        raise _no_body(event_id, blob_id)
    suffix = request.url_vars.get("suffix") or ""
    if suffix == "/raw":
        return await _raw(datasette, request, opened, event_id, blob_id)
    if suffix == "/download":
        return await _download(opened, event_id, blob_id)
    body = await opened.db.execute_fn(lambda conn: load_body(conn, blob_id))
    if body is None or body.get("event_id") != event_id:
        raise _no_body(event_id, blob_id)
    body_links(opened.links, event_id, body)
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
            secrets_guard.refused(
                "Raw bodies cannot be masked; they need the capsem-view-secrets permission."
            ),
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


class ByteStream:
    """A streamed response of bytes (Datasette's `AsgiStream` writes text): `chunks` is an
    async iterator of bytes, sent as they come."""

    def __init__(self, chunks, headers: dict[str, str], content_type: str) -> None:
        self.chunks, self.headers, self.content_type = chunks, headers, content_type

    async def asgi_send(self, send) -> None:
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        headers.append((b"content-type", self.content_type.encode("latin-1")))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        async for chunk in self.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


async def _download(opened, event_id: str, blob_id: int) -> ByteStream:
    """The whole body, however large, as a streamed attachment: the stored bytes for a reader
    who may see secrets, else the bytes with every credential-shaped substring masked (the
    same `mask_text`, over the bytes read as latin-1 so binary bodies keep their bytes).
    Masking needs the whole body at once (a credential may straddle two slices); Capsem keeps
    at most 10 MiB of a body (spec §4.4)."""
    policy = redaction.policy.get()
    if policy != redaction.OPEN and redaction.hide_free_text.get():
        raise CapsemError(
            403,
            "Download refused",
            secrets_guard.refused(
                "Bodies are hidden whole on this instance (hide_free_text); downloading one "
                "needs the capsem-view-secrets permission."
            ),
        )
    meta = await opened.db.execute_fn(lambda conn: body_meta(conn, blob_id))
    if meta is None or meta.get("event_id") != event_id:
        raise _no_body(event_id, blob_id)
    size = meta.get("body_length") or 0
    media = str(meta.get("content_type") or "").split(";", 1)[0].strip().lower()
    extension = EXTENSIONS.get(media, "bin")
    headers = {
        "content-disposition": f'attachment; filename="body-{blob_id}.{extension}"',
        "x-content-type-options": "nosniff",
        "x-capsem-stored-bytes": str(size),
        "x-capsem-masked": "0" if policy == redaction.OPEN else "1",
    }
    db = opened.db
    # A PNG, JPEG, GIF or WebP (by its bytes) is sent as one, so the detail panel can show it
    # with <img>; everything else, SVG included, stays an opaque download.
    head = await db.execute_fn(lambda conn: body_chunk(conn, blob_id, 0, 16))
    content_type = image_type(head) or "application/octet-stream"
    if policy == redaction.OPEN:
        headers["content-length"] = str(size)

        async def stream():
            for offset in range(0, size, CHUNK_BYTES):
                yield await db.execute_fn(
                    lambda conn, at=offset: body_chunk(conn, blob_id, at, CHUNK_BYTES)
                )

    else:
        whole = await db.execute_fn(lambda conn: body_chunk(conn, blob_id, 0, max(size, 1)))
        masked = redaction.mask_bytes(whole, force=True, content_type=meta.get("content_type"))
        headers["content-length"] = str(len(masked))

        async def stream():
            for offset in range(0, len(masked), CHUNK_BYTES):
                yield masked[offset : offset + CHUNK_BYTES]

    return ByteStream(stream(), headers, content_type)


def _raw_checked(conn, blob_id: int, event_id: str) -> bytes | None:
    found = raw_body(conn, blob_id)
    if found is None or found["event_id"] != event_id:
        return None
    return found["body"]


async def ledger_row(datasette, request):
    """`.../rows/<table>/<id>`: the row's event page, else Datasette's row page."""
    opened = await open_session(datasette, request, need_ledger=True)
    table, raw_id = url_value(request, "table"), url_value(request, "row_id")
    if not raw_id.isdigit() or len(raw_id) > MAX_BLOB_ID_DIGITS:
        raise errors.bad_parameter("Bad row id", "Row ids are integers.")
    if table not in opened.schema.tables:
        raise errors.not_found("Unknown table", f"This ledger has no table {table!r}.")
    row_id = int(raw_id)
    event_id = await opened.db.execute_fn(
        lambda conn: relations.row_event_id(conn, opened.schema, table, row_id)
    )
    raise Redirect(
        _event_or_row(opened.links, table, row_id, event_id)
        if event_id
        else opened.links.row(table, row_id)
    )


async def tool_call(datasette, request):
    """`.../tool-calls/<call_id>`: the event page of the tool call a call id names."""
    opened = await open_session(datasette, request, need_ledger=True)
    call_id = url_value(request, "call_id")
    problem = bad_value(call_id, "call id")
    if problem:
        raise errors.bad_parameter("Bad call id", problem)
    trace_id = request.args.get("trace") or None
    raw_model_call = request.args.get("model_call") or ""
    model_call = (
        int(raw_model_call) if raw_model_call.isdigit() and len(raw_model_call) < 19 else None
    )
    found = await opened.db.execute_fn(
        lambda conn: relations.call_for(conn, opened.schema, call_id, trace_id, model_call)
    )
    if found is None:
        raise errors.not_found(
            "No such tool call",
            f"No tool call of session {opened.session.id} has the call id {call_id!r}: a "
            "response whose call is missing is an orphan (see the integrity report).",
            [
                {
                    "id": opened.session.id,
                    "name": opened.session.display_name,
                    "href": opened.links.check(),
                }
            ],
        )
    raise Redirect(_event_or_row(opened.links, "tool_calls", found["id"], found["event_id"]))


ROUTES = [
    (
        r"^/-/capsem/sessions/(?P<session_id>[^/]+)/rows/(?P<table>[^/]+)/(?P<row_id>[^/]+)$",
        ledger_row,
    ),
    (r"^/-/capsem/sessions/(?P<session_id>[^/]+)/tool-calls/(?P<call_id>[^/]+)$", tool_call),
    (
        r"^/-/capsem/sessions/(?P<session_id>[^/]+)/events/(?P<event_id>[^/]+)"
        r"/bodies/(?P<blob_id>[^/]+?)(?P<suffix>\.json|/raw|/download)?$",
        body_page,
    ),
    (
        r"^/-/capsem/sessions/(?P<session_id>[^/]+)/events/(?P<event_id>[^/]+?)"
        r"(?P<format>\.json)?$",
        event_page,
    ),
]
