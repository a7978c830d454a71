"""ASGI layer: mount a session's ledger when a request names it, and guard plugin pages.

Datasette routes `/<database>/...` only to attached databases, so this wrapper looks at the
first path segment before Datasette does: a catalog session is mounted (evicting the least
recently used beyond the bound), an unknown one gets a 404 with near matches, and a ledger
that cannot be read gets a page naming the file and the problem.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources

from datasette.utils import tilde_decode
from datasette.utils.asgi import Request

from datasette_capsem import permissions, redaction
from datasette_capsem.mount.mounter import MAIN_DATABASE
from datasette_capsem.mount.readonly import LedgerUnavailable
from datasette_capsem.state import get_state
from datasette_capsem.views import render, secrets_guard

# First path segments that are Datasette's own, never a database.
NON_DATABASE_SEGMENTS = frozenset({"", "-", "favicon.ico", "robots.txt", "_memory"})
PLUGIN_PAGE_PREFIX = "/-/capsem"
SESSION_PAGE_PREFIX = "/-/capsem/sessions/"


def _inline_script_hashes() -> str:
    """CSP hashes of the inline scripts Datasette's base template itself emits."""
    template = resources.files("datasette").joinpath("templates", "_close_open_menus.html")
    script = template.read_text().split("<script>", 1)[1].rsplit("</script>", 1)[0]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return f"'sha256-{digest}'"


CONTENT_SECURITY_POLICY = (
    "default-src 'self'; "
    f"script-src 'self' {_inline_script_hashes()}; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'; connect-src 'self'"
)


def route_path(datasette, scope) -> str:
    """The request path as Datasette routes it: without the `base_url` prefix, if any."""
    path, base_url = scope["path"], datasette.setting("base_url") or "/"
    if base_url != "/" and path.startswith(base_url):
        return "/" + path[len(base_url) :]
    return path


def is_plugin_page(path: str) -> bool:
    return path == "/" or path.startswith(PLUGIN_PAGE_PREFIX)


def database_segment(path: str) -> str:
    """The database name a core Datasette path starts with ('' when none)."""
    first = path.lstrip("/").split("/", 1)[0]
    if first in NON_DATABASE_SEGMENTS:  # /favicon.ico is Datasette's, not a session "favicon"
        return first
    return tilde_decode(first.split(".", 1)[0]) if first else ""


def _request(scope, receive) -> Request:
    # This layer runs before Datasette's CSRF middleware, whose token the templates expect.
    return Request({**scope, "csrftoken": lambda: ""}, receive)


async def _problem_response(datasette, path: str, request, actor):
    """None when the request may go on to Datasette, else the error response to send.

    Nothing is mounted, decompressed or suggested for an actor who may not see it."""
    if "\x00" in path:
        return await render.error(
            datasette, request, 400, "Bad path", "The path contains a NUL byte."
        )
    name = database_segment(path)
    if name in NON_DATABASE_SEGMENTS or name == "_internal":
        return None
    if not await permissions.can_view_database(datasette, actor, name):
        return await render.error(datasette, request, 403, "Forbidden", "You may not view this.")
    state = get_state(datasette)
    if name == MAIN_DATABASE:
        if state.mounter.ensure_main() is None:
            problem = state.catalog.snapshot().main_db_problem or "main.db cannot be read"
            return await render.error(datasette, request, 404, "No session index", problem)
        return None
    if name in datasette.databases:
        return None
    session = state.catalog.session_for_database(name)
    if session is None:
        near = render.session_links(datasette, state.catalog.near_matches(name))
        return await render.error(
            datasette,
            request,
            404,
            "Unknown session",
            f"No session or database is called {name!r}.",
            suggestions=near,
        )
    if not state.catalog.recheck_ledger(session).has_ledger:
        return await render.no_ledger(datasette, request, session)
    try:
        await state.mounter.session_database(session)
    except LedgerUnavailable as problem:
        return await render.unreadable(datasette, request, problem, session)
    return None


def _with_security_headers(send, path: str):
    async def wrapped(message):
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or [])
            headers.append((b"x-content-type-options", b"nosniff"))
            if is_plugin_page(path):
                headers.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))
                headers.append((b"referrer-policy", b"same-origin"))
            message = {**message, "headers": headers}
        await send(message)

    return wrapped


def _refusal(path: str, scope, receive) -> tuple[str, str] | None:
    """(title, message) when the actor's secret policy forbids this request outright."""
    policy = redaction.policy.get()
    if policy == redaction.OPEN:
        return None
    if secrets_guard.refuses_raw(path):
        return (
            "Raw download refused",
            "Raw database and blob downloads could reveal "
            "credentials; they need the capsem-view-secrets permission.",
        )
    probed = secrets_guard.secret_column_probe(scope, receive) if policy != redaction.MASK else None
    if probed:
        return (
            "Secret-bearing column",
            f"Filtering, sorting or faceting on {probed!r} could "
            "reveal credentials; it needs the capsem-view-secrets permission.",
        )
    return None


async def _handle(app, datasette, path: str, scope, receive, send, actor) -> None:
    guarded_send = _with_security_headers(send, path)
    refusal = _refusal(path, scope, receive)
    if refusal:
        response = await render.error(datasette, _request(scope, receive), 403, *refusal)
        return await response.asgi_send(guarded_send)
    if redaction.policy.get() != redaction.OPEN and scope.get("method") != "HEAD":
        guarded_send = secrets_guard.masking_send(guarded_send, path)
    response = await _problem_response(datasette, path, _request(scope, receive), actor)
    if response is not None:
        return await response.asgi_send(guarded_send)
    return await app(scope, receive, guarded_send)


def pinned_database(datasette, path: str) -> str | None:
    """The session database a request will read: pinned so no other request evicts it."""
    catalog = get_state(datasette).catalog
    if path.startswith(SESSION_PAGE_PREFIX):
        segment = path[len(SESSION_PAGE_PREFIX) :].split("/", 1)[0]  # already %-decoded
        session = catalog.get(segment) or catalog.get(segment.removesuffix(".json"))
        return catalog.database_name(session) if session else None
    name = database_segment(path)
    if name in NON_DATABASE_SEGMENTS or name in (MAIN_DATABASE, "_internal"):
        return None
    return name if catalog.session_for_database(name) else None


def wrap(app, datasette):
    async def capsem_asgi(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        # Error pages render templates; without ASGI lifespan nothing else has started yet.
        await datasette.invoke_startup()
        path = route_path(datasette, scope)
        actor = await secrets_guard.request_actor(datasette, scope, receive)
        policy = await secrets_guard.request_policy(
            datasette, actor, scope, receive, is_plugin_page(path)
        )
        token = redaction.policy.set(policy)  # read by the database layer's worker threads
        mounter = get_state(datasette).mounter
        pinned = pinned_database(datasette, path)
        if pinned:
            mounter.pin(pinned)
        try:
            return await _handle(app, datasette, path, scope, receive, send, actor)
        finally:
            if pinned:
                mounter.unpin(pinned)
            redaction.policy.reset(token)

    return capsem_asgi
