"""Rendering helpers shared by every plugin page: HTML or JSON from one context, and errors."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from datasette.utils.asgi import Response

from datasette_capsem import errors, redaction
from datasette_capsem.config import split_qualified
from datasette_capsem.errors import CapsemError, Redirect
from datasette_capsem.graph.values import json_dumps
from datasette_capsem.urls import Urls

TEMPLATE_DIR = "capsem"


def wants_json(request) -> bool:
    return request.path.endswith(".json") or request.args.get("_format") == "json"


def json_response(
    data: Any, status: int = 200, headers: dict | None = None, filename: str | None = None
) -> Response:
    """Strict, unindented JSON, as Datasette's own: a NaN or infinite float (a REAL 9e999 in
    a ledger) becomes null, and json's C encoder (only used without indent) keeps a
    megabyte-sized graph.json or a 1,000-session list fast."""
    headers = dict(headers or {})
    data = redacted(data)
    if filename:
        headers["content-disposition"] = f'inline; filename="{filename}"'
    body = json_dumps(data, separators=(",", ":"))
    return Response(
        body, status=status, headers=headers, content_type="application/json; charset=utf-8"
    )


def json_text(data: Any, masks: dict[str, str] | None = None) -> str:
    """The body `json_response` sends for `data` (redacted for the current request; `masks`:
    texts already masked, see `redaction.redact_tree`)."""
    return json_dumps(redacted(data, masks), separators=(",", ":"))


def json_text_response(body: str, status: int = 200) -> Response:
    """A JSON response of a body made by `json_text` (for the current request's policy)."""
    return Response(body, status=status, content_type="application/json; charset=utf-8")


def redacted(data: Any, masks: dict[str, str] | None = None) -> Any:
    """What an actor without `view_secrets` may see of a page's data (redaction.py's policy:
    carriers hidden whole, free text masked, bytes decoded and masked)."""
    if redaction.policy.get() == redaction.OPEN:
        return data
    return redaction.redact_tree(data, masked=masks)


async def page(
    datasette,
    request,
    template: str,
    context: dict[str, Any],
    *,
    data: Any = None,
    status: int = 200,
    redacted_parts: tuple[str, ...] = (),
) -> Response:
    """The JSON form (`data`, else `context`) or the HTML form of one page. `redacted_parts`:
    keys of `context` whose values were already redacted for this request's policy (kept per
    file version and policy by their page): not walked again (with no `data` given)."""
    if redacted_parts and data is None:
        done = {key: context[key] for key in redacted_parts if key in context}
        rest = redacted({k: v for k, v in context.items() if k not in done})
        context = {key: done[key] if key in done else rest[key] for key in context}
        if wants_json(request):
            body = json_dumps(context, separators=(",", ":"))
            return Response(body, status=status, content_type="application/json; charset=utf-8")
    elif wants_json(request):
        return json_response(context if data is None else data, status=status)
    else:
        context = redacted(context)
    html = await datasette.render_template(f"{TEMPLATE_DIR}/{template}", context, request=request)
    return Response.html(html, status=status)


async def error(
    datasette,
    request,
    status: int,
    title: str,
    message: str,
    *,
    path: str | None = None,
    suggestions: list[dict] | None = None,
) -> Response:
    """A page (or JSON) that names the problem; never a traceback."""
    data = {
        "ok": False,
        "status": status,
        "error": title,
        "message": message,
        "path": path,
        "suggestions": suggestions or [],
    }
    return await page(datasette, request, "error.html", data, status=status)


def answering_errors(view: Callable[[Any, Any], Awaitable[Response]]):
    """A route's view whose raised `CapsemError` or `Redirect` becomes its page here, before
    Datasette's own exception handler (which would log a traceback for a plain 4xx)."""

    @functools.wraps(view)
    async def wrapped(datasette, request) -> Response:
        try:
            return await view(datasette, request)
        except (CapsemError, Redirect) as problem:
            return await failure(datasette, request, problem)

    return wrapped


async def failure(datasette, request, problem: CapsemError | Redirect) -> Response:
    """The response for a raised `CapsemError` (its page, HTML or JSON) or `Redirect`."""
    if isinstance(problem, Redirect):
        return Response.redirect(problem.location)
    return await error(
        datasette,
        request,
        problem.status,
        problem.title,
        problem.message,
        path=problem.path,
        suggestions=problem.suggestions,
    )


def unreadable(datasette, problem, session=None) -> CapsemError:
    """The error for a Capsem file that cannot be read (a `LedgerUnavailable`)."""
    whose = f"The ledger of session {session.id}" if session else "The file"
    return errors.unreadable(problem, whose, session_links(datasette, [session] if session else []))


def no_ledger(datasette, session) -> CapsemError:
    """The error for a session whose directory, and so its ledger, is gone."""
    return errors.no_ledger(session.id, session_links(datasette, [session]))


def session_links(datasette, sessions) -> list[dict[str, Any]]:
    """Sessions as error pages list them: always by id, the name only displayed."""
    return [
        {
            "id": s.id,
            "name": s.display_name,
            "href": Urls.of(datasette).session(s.id),
        }
        for s in sessions
    ]


def home_unavailable(catalog, address: str) -> CapsemError | None:
    """A 503 for an address `<label>--<id>` (a session or a database) of a labelled home that
    is gone for now (unmounted, a sync that removed it): say since when, rather than 'unknown'."""
    qualified = split_qualified(address) if catalog.labelled else None
    state = catalog.home_state(qualified[0]) if qualified else None
    if state is None or state.available:
        return None
    return CapsemError(
        503,
        "Home unavailable",
        f"The Capsem home {state.label!r} ({state.path}) is unavailable since "
        f"{state.unavailable_since}; its sessions are served again as soon as it is back.",
    )
