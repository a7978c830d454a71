"""Opening the session a URL names, for every page under `/-/capsem/sessions/<id>`.

The id is looked up in the catalog (never joined into a path); a display name or a unique id
prefix redirects to the id; permissions are checked before anything is mounted, and a session
the actor may not view answers exactly like an unknown one.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from datasette.utils import tilde_decode
from datasette.utils.asgi import NotFound

from datasette_capsem import errors, permissions, redaction
from datasette_capsem.catalog import Session
from datasette_capsem.catalog.resolve import Resolution, resolve_name
from datasette_capsem.errors import CapsemError, Redirect
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.mount.ledger_db import LedgerDatabase
from datasette_capsem.readonly import LedgerUnavailable
from datasette_capsem.state import get_state
from datasette_capsem.urls import SessionUrls, Urls
from datasette_capsem.views import render

MAX_ID_CHARS = 256
DEFAULT_TRACE_PAGE = 50
MAX_TRACE_PAGE = 1000
MAX_OFFSET = 10**9
PAGE_PROBLEM = "_size must be an integer from 1 to 1000 (or 'max'), _next an integer from 0"


@dataclass
class Opened:
    """A session resolved from a URL, with its mounted ledger when it has one."""

    session: Session
    links: SessionUrls
    db: LedgerDatabase | None = None
    schema: LedgerSchema | None = None
    problem: LedgerUnavailable | None = None


def url_value(request, name: str) -> str:
    """A path variable, percent-decoded (Datasette routes on the raw path)."""
    return unquote(request.url_vars.get(name) or "")


def bad_value(value: str, what: str, max_chars: int = MAX_ID_CHARS) -> str | None:
    """Why an id from a URL cannot be looked up, or None when it can."""
    if not value:
        return f"The {what} is empty."
    if "\x00" in value:
        return f"The {what} contains a NUL byte."
    if len(value) > max_chars:
        return f"The {what} is {len(value)} characters long; ids are at most {max_chars}."
    return None


def page_bounds(request) -> tuple[int, int]:
    """(offset, size) from Datasette-style `_next` and `_size`; a 400 naming the problem."""
    raw_size = request.args.get("_size") or str(DEFAULT_TRACE_PAGE)
    raw_next = request.args.get("_next") or "0"
    if raw_size == "max":
        raw_size = str(MAX_TRACE_PAGE)
    if not (raw_size.isdigit() and raw_next.isdigit()) or len(raw_size) + len(raw_next) > 20:
        raise errors.bad_parameter("Bad pagination", PAGE_PROBLEM)
    size, offset = int(raw_size), int(raw_next)
    if not 1 <= size <= MAX_TRACE_PAGE or offset > MAX_OFFSET:
        raise errors.bad_parameter("Bad pagination", PAGE_PROBLEM)
    return offset, size


def links_for(datasette, session: Session) -> SessionUrls:
    database = get_state(datasette).catalog.database_name(session)
    return Urls.of(datasette).for_session(session.id, database)


async def may_view(datasette, request, session: Session) -> bool:
    """Whether the actor may view this session's database (a session they may not view is
    answered exactly as one that does not exist)."""
    return await permissions.can_view_database(
        datasette, request.actor, links_for(datasette, session).database
    )


async def viewable_resolution(datasette, request, resolution: Resolution) -> Resolution:
    """The rule book's answer as if the sessions this actor may not view did not exist (a
    candidate, a redirect or a suggestion would confirm their id or name): they leave the
    candidates, and a name left with one candidate resolves to it."""
    catalog = get_state(datasette).catalog
    kept = []
    for found in resolution.candidates:
        session = catalog.get(found["id"])
        if session is not None and await may_view(datasette, request, session):
            kept.append(found)
    if len(kept) == len(resolution.candidates):
        return resolution
    chosen = resolution.id if any(c["id"] == resolution.id for c in kept) else None
    if chosen is None and len(kept) == 1:
        chosen = kept[0]["id"]
    return Resolution(name=resolution.name, id=chosen, candidates=kept)


async def unknown_session(datasette, request, value: str, *, suggest: bool = True) -> CapsemError:
    """404 for an id no session has (or one the actor may not view: the same answer)."""
    near = []
    if suggest:  # only sessions the actor may view: a suggestion confirms an id exists
        for session in get_state(datasette).catalog.near_matches(
            value, shown=redaction.name_view()
        ):
            if await may_view(datasette, request, session):
                near.append(session)
    near = render.session_links(datasette, near)
    return errors.not_found("Unknown session", f"No session has the id {value!r}.", near)


async def open_session(datasette, request, *, need_ledger: bool) -> Opened:
    """Resolve `session_id` from the URL through the catalog (never as a path); raise a
    `CapsemError` (or a `Redirect` for a display name) when it names no viewable session."""
    return await open_session_id(
        datasette, request, url_value(request, "session_id"), need_ledger=need_ledger
    )


async def open_session_id(
    datasette, request, value: str, *, need_ledger: bool, by_name: bool = True
) -> Opened:
    """`open_session` for a session id given elsewhere than the path (`by_name` False: a
    display name is not resolved, it is an unknown id). The actor's right to view the
    instance is checked before any lookup, and a session the actor may not view answers
    exactly as one that does not exist."""
    problem = bad_value(value, "session id")
    if problem:
        raise errors.bad_parameter("Bad session id", problem)
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    catalog = get_state(datasette).catalog
    session = catalog.get(value)
    if session is None:
        unavailable = render.home_unavailable(catalog, value)
        if unavailable is not None:
            raise unavailable
        if not by_name:
            raise await unknown_session(datasette, request, value)
        raise await _by_name(datasette, request, value)
    opened = Opened(session, links_for(datasette, session))
    if not await permissions.can_view_database(datasette, request.actor, opened.links.database):
        # As if it did not exist: a 403 here would confirm the id.
        raise await unknown_session(datasette, request, value, suggest=False)
    if not session.has_ledger:
        if need_ledger:
            raise render.no_ledger(datasette, session)
        return opened
    try:
        opened.db = await get_state(datasette).mounter.session_database(session)
        opened.schema = await opened.db.ledger_schema()
    except LedgerUnavailable as error:
        if need_ledger:
            raise errors.unreadable(error, f"The ledger of session {session.id}") from error
        opened.problem, opened.db, opened.schema = error, None, None
    return opened


async def _by_name(datasette, request, value: str) -> CapsemError | Redirect:
    """A display name in the URL: redirect to the one session it names, else explain."""
    catalog = get_state(datasette).catalog
    resolution = await viewable_resolution(datasette, request, resolve_name(catalog, value))
    if resolution.id:
        return _redirect_to_id(request, datasette, catalog.get(resolution.id))
    if not resolution.ambiguous:
        return await unknown_session(datasette, request, value)
    # A chooser, never a guess, of the candidates this actor may view.
    urls, rest = Urls.of(datasette), _rest_of_path(request)
    offered = [
        {
            "id": found["id"],
            "name": found["name"],
            "href": urls.session(found["id"]) + rest,
            **{k: found.get(k) for k in ("kind", "status", "created_at")},
            **({"home": found["home"]} if found.get("home") else {}),
        }
        for found in resolution.candidates
    ]
    match = resolution.candidates[-1]["match"]
    if match == "id":  # the same id in several labelled homes
        message = f"Several homes have a session {value!r}; pick one by its home."
    else:
        what = "start with" if match == "prefix" else "are called"
        message = f"Several sessions {what} {value!r}; pick one by its id."
    return errors.CapsemError(300, "Ambiguous session", message, offered)


def _rest_of_path(request) -> str:
    """What follows `/sessions/<id>` in the raw path (e.g. `/traces/abc`), kept encoded."""
    raw_id = request.url_vars.get("session_id") or ""
    raw = request.scope.get("raw_path") or request.path.encode("utf-8")
    raw = raw.decode("latin-1").partition("?")[0]
    marker = "/sessions/" + raw_id
    return raw[raw.find(marker) + len(marker) :] if marker in raw else ""


def _redirect_to_id(request, datasette, session: Session) -> Redirect:
    """A display name in the URL: send the reader to the id, which is what selects data."""
    rest = _rest_of_path(request)
    query = request.query_string
    target = links_for(datasette, session).session() + rest
    return Redirect(target + (f"?{query}" if query else ""))


def missing_row(datasette, request, exception) -> CapsemError | None:
    """Datasette's bare "Record not found" on a row page of a Capsem session's database, as the
    plugin's 404 page that names the table and row and leads back to the session and the
    table; None for any other error or database, which keep Datasette's answer. (Datasette
    checks the actor may view the table before it looks for the row.)"""
    url_vars = getattr(request, "url_vars", None) or {}
    message = str(exception.args[0]) if isinstance(exception, NotFound) and exception.args else ""
    # 0.65: "Record not found"; 1.0: RowNotFound's "Row not found", or "Record not found: [pks]"
    if not message.startswith(("Record not found", "Row not found")):
        return None
    if not {"database", "table", "pks"} <= set(url_vars):
        return None
    database = tilde_decode(url_vars["database"])
    session = get_state(datasette).catalog.session_for_database(database)
    if session is None:
        return None
    row, table = tilde_decode(url_vars["pks"]), tilde_decode(url_vars["table"])
    back = render.session_links(datasette, [session])
    back.append({"id": f"the {table} table", "href": Urls.of(datasette).table(database, table)})
    return errors.not_found(
        "Row not found", f"The {table} table of session {session.id} has no row {row!r}.", back
    )
