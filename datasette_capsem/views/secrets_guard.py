"""Per-request secret policy: who may see credentials, and masking of what goes out.

Runs in the ASGI layer, outside Datasette's router, so it covers every route (core pages,
JSON, CSV, canned queries and plugin pages) in one place.
"""

from __future__ import annotations

from datasette.utils import await_me_maybe
from datasette.utils.asgi import Request

from datasette_capsem import permissions, redaction

TEXT_TYPES = (b"text/", b"application/json", b"application/xml")
UNMASKED_PREFIXES = ("/-/static/", "/-/static-plugins/")
# Raw bytes cannot be masked; these routes are refused to actors who may not see secrets.
RAW_SUFFIXES = (".db", ".blob")


async def request_actor(datasette, scope, receive) -> dict | None:
    """The actor Datasette will see for this request (same hooks, same order)."""
    # Imported here: importing datasette.plugins loads every plugin's entry point, and doing
    # that while datasette_capsem itself is being imported registers a half-built module.
    from datasette.plugins import pm

    request = Request(scope, receive)
    for candidate in pm.hook.actor_from_request(datasette=datasette, request=request):
        actor = await await_me_maybe(candidate)
        if actor:
            return actor
    return None


SQL_PARAMETERS = ("sql", "_where")
COLUMN_VALUE_PARAMETERS = ("_sort", "_sort_desc", "_facet", "_facet_array", "_facet_date")


async def request_policy(datasette, actor, scope, receive, plugin_page: bool) -> str:
    if await permissions.can_view_secrets(datasette, actor):
        return redaction.OPEN
    # Plugin pages run only their own SQL; Datasette's routes run the actor's.
    if plugin_page:
        return redaction.MASK
    params = Request(scope, receive).args
    return redaction.HIDE_SQL if any(p in params for p in SQL_PARAMETERS) else redaction.HIDE


def secret_column_probe(scope, receive) -> str | None:
    """A secret-bearing column the request filters, sorts or facets on, if any: a filter is a
    yes/no oracle on the value even when the value itself reads as NULL."""
    args = Request(scope, receive).args
    for key in args:
        candidates = args.getlist(key) if key in COLUMN_VALUE_PARAMETERS else [key.split("__")[0]]
        for column in candidates:
            if column.lower() in redaction.ALL_SECRET_COLUMNS:
                return column
    return None


def refuses_raw(path: str) -> bool:
    return path.split("?", 1)[0].endswith(RAW_SUFFIXES)


def _is_text(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.lower().startswith(TEXT_TYPES)
    return False


def masking_send(send, path: str):
    """Buffer a text response, mask secrets in it, and send it with a corrected length."""
    if path.startswith(UNMASKED_PREFIXES):
        return send
    start: dict | None = None
    chunks: list[bytes] = []

    async def wrapped(message):
        nonlocal start
        if message["type"] == "http.response.start":
            if not _is_text(list(message.get("headers") or [])):
                start = None
                await send(message)
                return
            start = message
            return
        if message["type"] != "http.response.body" or start is None:
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return
        body = redaction.mask_text(b"".join(chunks).decode("utf-8", "replace")).encode("utf-8")
        headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return wrapped
