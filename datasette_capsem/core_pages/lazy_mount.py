"""ASGI layer: mount a session's ledger when a request names it, and guard plugin pages.

Datasette routes `/<database>/...` only to attached databases, so this wrapper looks at the
first path segment before Datasette does: a catalog session is mounted (evicting the least
recently used beyond the bound), an unknown one gets a 404 with near matches, and a ledger
that cannot be read gets a page naming the file and the problem.
"""

from __future__ import annotations

import functools
import json
import re
from urllib.parse import parse_qsl

from datasette.utils import escape_sqlite, tilde_decode
from datasette.utils.asgi import Request, Response

from datasette_capsem import errors, permissions, redaction
from datasette_capsem.core_pages import canned_queries, inline_scripts, secrets_guard
from datasette_capsem.core_pages.canned_queries import store_queries
from datasette_capsem.errors import CapsemError
from datasette_capsem.index.database import INDEX_DATABASE
from datasette_capsem.ledger import tables
from datasette_capsem.mount.ledger_db import (
    facet_suggestion_columns,
    facets_counting,
    inline_queries,
    request_scope,
)
from datasette_capsem.readonly import LedgerUnavailable
from datasette_capsem.state import get_role, get_state
from datasette_capsem.views import render

# First path segments that are Datasette's own, never a database.
NON_DATABASE_SEGMENTS = frozenset({"", "-", "favicon.ico", "robots.txt", "_memory"})
PLUGIN_PAGE_PREFIX = "/-/capsem"
STATIC_PREFIX = "/-/static-plugins/datasette-capsem"
SESSION_PAGE_PREFIX = "/-/capsem/sessions/"


def _policy(script_src: str, extra: str = "") -> str:
    return (
        "default-src 'self'; "
        f"script-src {script_src}{extra}; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'; form-action 'self'; connect-src 'self'"
    )


# Plugin pages: no inline script but Datasette's templates' and other plugins' body scripts,
# hashed (core_pages/inline_scripts.py), and no string evaluation.
STRICT_SCRIPT_SRC = f"'self' {inline_scripts.static_hashes()}"
CONTENT_SECURITY_POLICY = _policy(STRICT_SCRIPT_SRC)
# Datasette's own pages load the bundles other installed plugins add (datasette-vega's
# evaluates strings): they keep the same script origins and hashes, plus 'unsafe-eval'. No
# inline script from a page's data can run on either.
CORE_SCRIPT_SRC = f"'self' 'unsafe-eval' {inline_scripts.static_hashes()}"
CORE_CONTENT_SECURITY_POLICY = _policy(CORE_SCRIPT_SRC)


def route_path(datasette, scope) -> str:
    """The request path as Datasette routes it: without the `base_url` prefix, if any."""
    path, base_url = scope["path"], datasette.setting("base_url") or "/"
    if base_url != "/" and path.startswith(base_url):
        return "/" + path[len(base_url) :]
    return path


def is_plugin_page(path: str) -> bool:
    return path == "/" or path.startswith(PLUGIN_PAGE_PREFIX)


def is_own_database_page(datasette, path: str) -> bool:
    """A page of a database the user gave Datasette beside the Capsem home (a mixed instance):
    left to Datasette and the other plugins, untouched by this layer."""
    own = get_role(datasette).own_databases
    return bool(own) and not is_plugin_page(path) and database_segment(path) in own


def shows_capsem_data(path: str) -> bool:
    """Plugin pages and the Capsem databases' pages (any database segment that is not one of
    the user's, which `is_own_database_page` let through before): read-only. Datasette's other
    `/-/` pages and other plugins' (a login form) keep their own methods."""
    if is_plugin_page(path) or path.startswith(STATIC_PREFIX):
        return True
    name = database_segment(path)
    return name not in NON_DATABASE_SEGMENTS and name != "_internal"


def database_segment(path: str) -> str:
    """The database name a core Datasette path starts with ('' when none)."""
    first = path.lstrip("/").split("/", 1)[0]
    if first in NON_DATABASE_SEGMENTS:  # /favicon.ico is Datasette's, not a session "favicon"
        return first
    return tilde_decode(first.split(".", 1)[0]) if first else ""


def _request(scope, receive) -> Request:
    # This layer runs before Datasette's CSRF middleware, whose token the templates expect.
    return Request({**scope, "csrftoken": lambda: ""}, receive)


async def _mount_for(datasette, path: str, actor) -> None:
    """Mount the database a core Datasette request reads, or raise the `CapsemError` to send.

    Nothing is mounted, decompressed or suggested for an actor who may not see it."""
    if "\x00" in path:
        raise errors.bad_parameter("Bad path", "The path contains a NUL byte.")
    name = database_segment(path)
    if name in NON_DATABASE_SEGMENTS or name == "_internal":
        return
    if not await permissions.can_view_database(datasette, actor, name):
        raise errors.forbidden()
    state = get_state(datasette)
    main_label = state.mounter.main_label(name)
    if main_label is not None:
        if state.mounter.ensure_main(name) is None:
            snapshot = state.catalog.snapshot()
            snapshot = snapshot.home_snapshots.get(main_label, snapshot) if main_label else snapshot
            problem = snapshot.main_db_problem or "main.db cannot be read"
            raise errors.not_found("No session index", problem)
        return await store_queries(datasette, name)
    if name in datasette.databases:
        return await store_queries(datasette, name)
    session = state.catalog.session_for_database(name)
    if session is None:
        unavailable = render.home_unavailable(state.catalog, name)
        if unavailable is not None:
            raise unavailable
        near = [
            s
            for s in state.catalog.near_matches(name)
            if await permissions.can_view_database(datasette, actor, state.catalog.database_name(s))
        ]
        near = render.session_links(datasette, near)
        raise errors.not_found(
            "Unknown session", f"No session or database is called {name!r}.", near
        )
    if not state.catalog.recheck_ledger(session).has_ledger:
        raise render.no_ledger(datasette, session)
    try:
        await state.mounter.session_database(session)
    except LedgerUnavailable as problem:
        raise render.unreadable(datasette, problem, session) from problem
    await store_queries(datasette, name)


SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
)


_REPLACED_HEADERS = tuple(name for name, _value in SECURITY_HEADERS)


# Datasette's note on a table page whose facet counts overran its facet time limit, and what it
# says instead when those counts are being made in the background for the file's version (a
# big ledger's facets are not counted in the request: mount/ledger_db.py, `facets_counting`).
FACETS_TIMED_OUT = "These facets timed out: "
FACETS_BEING_COUNTED = (
    "This ledger is big: these facets are being counted in the background for this version of "
    "the file, and appear when you reload the page in a moment: "
)
# What a big ledger's table page says while its rows are being counted (its count is not in
# the page, nor in its JSON: Datasette's own "count unknown", null).
ROWS_BEING_COUNTED = (
    '<p class="message-info capsem-partial capsem-rows-counting">This ledger is big: the '
    "number of this table's rows is being read in the background for this version of the "
    "file, and appears when you reload the page in a moment.</p>"
)


def _noting_counts(html: str, counting: list) -> str:
    """A table page's HTML with what its background counts mean (`facets_counting`)."""
    if any(key[0] == "count" for key in counting) and FACETS_TIMED_OUT in html:
        html = html.replace(FACETS_TIMED_OUT, FACETS_BEING_COUNTED, 1)
    filters = re.search(r'<form class="(?:core )?filters"', html)
    if any(key[0] == "rows" for key in counting) and filters:  # above the table's filters
        html = html[: filters.start()] + ROWS_BEING_COUNTED + html[filters.start() :]
    return html


def _with_security_headers(send, path: str):
    """Every response of every route: no sniffing, no framing, no referrer to other sites;
    every response (Datasette's own pages and error pages too): the CSP. An HTML page is held
    until its body is complete: its policy also lets run the inline scripts of Datasette's
    templates that carry data (core_pages/inline_scripts.py)."""
    strict = is_plugin_page(path) or path.startswith(STATIC_PREFIX)
    script_src = STRICT_SCRIPT_SRC if strict else CORE_SCRIPT_SRC
    held: dict = {}

    def start(message, extra: list[str]):
        headers = [
            (k, v)
            for k, v in message.get("headers") or []
            if k.lower() not in _REPLACED_HEADERS  # one of each (Datasette sends its own)
        ]
        headers += SECURITY_HEADERS
        if not any(k.lower() == b"content-security-policy" for k, _v in headers):
            policy = _policy(script_src, "".join(f" {digest}" for digest in extra))
            headers.append((b"content-security-policy", policy.encode()))
        return {**message, "headers": headers}

    async def wrapped(message):
        if message["type"] == "http.response.start":
            content_type = dict((k.lower(), v) for k, v in message.get("headers") or []).get(
                b"content-type", b""
            )
            if content_type.startswith(b"text/html"):
                held["start"], held["body"] = message, []
                return
            message = start(message, [])
        elif message["type"] == "http.response.body" and "start" in held:
            held["body"].append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = b"".join(held["body"])
            html = body.decode("utf-8", "replace")
            begun = held.pop("start")
            counting = facets_counting.get()
            if counting and (noted := _noting_counts(html, counting)) != html:
                html = noted
                body = html.encode("utf-8")
                headers = [(k, v) for k, v in begun["headers"] if k.lower() != b"content-length"]
                headers.append((b"content-length", str(len(body)).encode()))
                begun = {**begun, "headers": headers}
            await send(start(begun, inline_scripts.response_hashes(html)))
            message = {"type": "http.response.body", "body": body}
        await send(message)

    return wrapped


# --- refused before anything is looked up -------------------------------------------------------

MAX_QUERY_STRING_BYTES = 8192
MAX_QUERY_PARAMETERS = 64
READ_METHODS = ("GET", "HEAD")


def _plain(status: int, message: str, extra: tuple = ()) -> Response:
    return Response.text(message + "\n", status=status, headers=dict(extra))


def cheap_refusal(datasette, scope, path: str) -> Response | None:
    """A response for a request refused on its shape alone (no parsing of its parameters, no
    lookup, no permission check): cheap enough for a flood."""
    query = scope.get("query_string") or b""
    if len(query) > MAX_QUERY_STRING_BYTES:
        return _plain(414, f"Query string too long: at most {MAX_QUERY_STRING_BYTES} bytes.")
    if query.count(b"&") + query.count(b";") + 1 > MAX_QUERY_PARAMETERS:
        return _plain(400, f"Too many query parameters: at most {MAX_QUERY_PARAMETERS}.")
    if scope.get("method", "GET") not in READ_METHODS and shows_capsem_data(path):
        return _plain(
            405, "Method not allowed: this instance is read-only.", ((("allow", "GET, HEAD")),)
        )
    header = get_state(datasette).settings.trusted_actor_header
    if header:
        name = header.lower().encode("latin-1")
        if sum(1 for key, _value in scope.get("headers") or [] if key.lower() == name) > 1:
            return _plain(
                400,
                f"The {header} header appears more than once; the proxy must overwrite it.",
            )
    return None


def _refusal(datasette, path: str, scope, receive) -> tuple[str, str] | None:
    """(title, message) when the actor's secret policy forbids this request outright."""
    policy = redaction.policy.get()
    if policy == redaction.OPEN:
        return None
    if secrets_guard.refuses_raw(path):
        return (
            "Raw download refused",
            secrets_guard.refused(
                "Raw database and blob downloads could reveal "
                "credentials; they need the capsem-view-secrets permission."
            ),
        )
    if policy == redaction.MASK:
        return None
    database, table = database_kind(datasette, path), table_segment(path)
    probed = secrets_guard.column_probe(scope, receive, database, table)
    if probed:
        return ("Column not shown to you", probed)
    return None


def database_kind(datasette, path: str) -> str:
    """Which registry classifies the columns of the database a path reads: "index", "main"
    (any home's main.db) or "ledger"."""
    return registry_of(datasette, database_segment(path))


def registry_of(datasette, name: str) -> str:
    """Which registry classifies the columns of the database named `name` (see above)."""
    if name == INDEX_DATABASE:
        return "index"
    return "main" if get_state(datasette).mounter.main_label(name) is not None else "ledger"


def table_segment(path: str) -> str | None:
    """The table (or canned query) a core Datasette path names, its format suffix removed;
    None for a database's own page."""
    segments = path.strip("/").split("/")
    if len(segments) < 2 or not segments[1]:
        return None
    table = tilde_decode(segments[1])
    for suffix in (".json", ".csv"):
        if table.endswith(suffix) and len(segments) == 2:
            return table[: -len(suffix)]
    return table


async def sql_refusal(datasette, path: str, request) -> str | None:
    """Why an actor's own SQL (`?sql=`, `_where=`) is refused, or None: it may read only
    columns shown raw (ledger/tables.py), since an expression (hex, replace, substr, a
    comparison) over any other column carries its value past the masker."""
    database = datasette.databases.get(database_segment(path))
    columns_read = getattr(database, "columns_read", None)
    if columns_read is None:
        return None
    statements = list(request.args.getlist("sql"))
    table = table_segment(path)
    if table is not None:
        statements += [
            f"select 1 from {escape_sqlite(table)} where ({where})"
            for where in request.args.getlist("_where")
        ]
    for sql in statements:
        for table_name, column, kind in await columns_read(sql):
            return secrets_guard.probe_refusal(column, kind, table_name, "SQL reading a column")
    return None


async def canned_refusal(datasette, path: str, request) -> str | None:
    """Why a canned query's parameters are refused to this reader, or None
    (`secrets_guard.canned_parameter_refusal`)."""
    table = table_segment(path)
    if table is None or not request.args:
        return None
    kind = database_kind(datasette, path)
    if table in tables.COLUMNS_OF_DATABASE.get(kind, {}):  # a table page, not a query
        return None
    name = database_segment(path)
    queries = await canned_queries.all_queries_for_database(datasette, name)
    query = queries.get(table) or await _instance_query(datasette, name, table, request.actor)
    if query is None:
        return None
    return secrets_guard.canned_parameter_refusal(kind, query, request.args)


async def _instance_query(datasette, database: str, name: str, actor) -> dict | None:
    """A canned query the operator defined (metadata.yml on 0.65, a stored query on 1.0) for
    a Capsem database, as {sql, params}; None when there is none."""
    if canned_queries.database_kind(datasette, database) is None:
        return None
    if permissions.DATASETTE_1:
        stored = await datasette.get_query(database, name)
        return {"sql": stored.sql, "params": stored.parameters} if stored else None
    found = (await datasette.get_canned_queries(database, actor) or {}).get(name)
    return dict(found) if isinstance(found, dict) else None


PUBLIC_METADATA = (
    "title",
    "description",
    "description_html",
    "license",
    "license_url",
    "source",
    "source_url",
    "about",
    "about_url",
)


# Datasette's pages of the instance's configuration: 0.65's /-/metadata, and 1.0's /-/config
# (where 1.0 moved the plugins' settings, the trusted header among them).
CONFIG_PAGES = ("/-/metadata", "/-/metadata.json") + (
    ("/-/config", "/-/config.json") if permissions.DATASETTE_1 else ()
)


async def _public_metadata(datasette, request) -> Response:
    """/-/metadata (or 1.0's /-/config) for an actor who is not an operator: what the instance
    is, not how it is configured (no allow lists, no trusted header, no plugin settings)."""
    metadata = await permissions.instance_metadata(datasette)
    public: dict = {key: metadata[key] for key in PUBLIC_METADATA if key in metadata}
    name = "config" if "/-/config" in request.path else "metadata"
    if name == "config":
        public = {"hidden": "The instance's configuration is shown to its operators only."}
    if request.path.endswith(".json"):
        return Response.json(public)
    html = await datasette.render_template(
        "show_json.html",
        {"filename": f"{name}.json", "data": public, "data_json": json.dumps(public, indent=4)},
        request=request,
    )
    return Response.html(html)


# Datasette's own pages that 1.0 answers without asking for the instance permission (0.65
# refuses them to an actor who may not view the instance): refused here on both lines alike.
UNCHECKED_CORE_PAGES = ("/-/actor", "/-/actor.json")


async def _plugin_page_refusal(datasette, path: str, request, actor) -> Response | None:
    """Plugin pages: the instance permission, and a session's database permission, are checked
    before any lookup, suggestion or redirect; a refused actor learns nothing."""
    guarded = is_plugin_page(path) or path.rstrip("/") in UNCHECKED_CORE_PAGES
    if guarded and not await permissions.can_view_instance(datasette, actor):
        return await render.failure(datasette, request, errors.forbidden())
    return None


async def _handle(app, datasette, path: str, scope, receive, send, actor) -> None:
    guarded_send = _with_security_headers(send, path)
    request = _request(scope, receive)
    response = await _plugin_page_refusal(datasette, path, request, actor)
    if response is None:
        refusal = _refusal(datasette, path, scope, receive)
        if refusal:
            response = await render.error(datasette, request, 403, *refusal)
    if response is None and not is_plugin_page(path):
        problem = secrets_guard.core_parameter_problem(path, request.args)
        if problem:
            response = await render.error(datasette, request, 400, "Bad parameter", problem)
    operator = redaction.policy.get() == redaction.OPEN
    if response is None and not operator and path.rstrip("/") in CONFIG_PAGES:
        if await permissions.can_view_instance(datasette, actor):
            response = await _public_metadata(datasette, request)
        else:
            response = await render.failure(datasette, request, errors.forbidden())
    mask = not operator
    paths = None if operator else secrets_guard.private_paths(datasette)
    csv = path.endswith(".csv") or "_format=csv" in (scope.get("query_string") or b"").decode(
        "latin-1"
    )
    if (mask or csv) and scope.get("method") != "HEAD":
        guarded_send = secrets_guard.masking_send(guarded_send, path, mask=mask, paths=paths)
    if response is not None:
        return await response.asgi_send(guarded_send)
    try:
        await _mount_for(datasette, path, actor)
    except CapsemError as problem:
        response = await render.failure(datasette, request, problem)
        return await response.asgi_send(guarded_send)
    if redaction.policy.get() == redaction.HIDE:
        problem = await canned_refusal(datasette, path, request)
        if problem:
            response = await render.error(datasette, request, 403, "Parameter refused", problem)
            return await response.asgi_send(guarded_send)
    if redaction.policy.get() == redaction.HIDE_SQL:
        problem = await sql_refusal(datasette, path, request)
        if problem:
            response = await render.error(datasette, request, 403, "SQL not allowed", problem)
            return await response.asgi_send(guarded_send)
    return await app(scope, receive, guarded_send)


def without_suggestions(datasette, scope, path: str):
    """JSON of main.db's tables without Datasette's facet suggestions: on 10,000 sessions they
    are 180 of 190 ms of `/main/sessions.json` (a count query per column), and an API reader
    asks for facets by name (`_facet=`, still answered). A request that names `_nosuggest`
    itself is left as it is; HTML pages keep their suggestions."""
    query = scope.get("query_string") or b""
    wants_json = path.endswith(".json") or b"_format=json" in query
    if not wants_json or b"_nosuggest" in query:
        return scope
    if get_state(datasette).mounter.main_label(database_segment(path)) is None:  # any home's
        return scope
    return {**scope, "query_string": query + b"&_nosuggest=1" if query else b"_nosuggest=1"}


def suggestion_columns(datasette, path: str):
    """The columns of a Capsem table a core page reads on which Datasette may suggest a facet
    (`ledger_db.facet_suggestion_columns`): those a facet of is neither refused to a viewer nor
    useless, SHOWN and NAMED (`secrets_guard.viewer_may_facet`, ledger/tables.py), for every
    reader. A facet suggestion on a body, a carrier or free text runs a statement or two over
    the whole table (seconds on a 10 MB body each, `json_type` failing on text that is not
    JSON) for a facet no one can use. None (Datasette's choice) off a classified table."""
    if is_plugin_page(path) or not shows_capsem_data(path):
        return None
    table = table_segment(path)
    database = database_kind(datasette, path)
    if table is None or table not in tables.COLUMNS_OF_DATABASE.get(database, {}):
        return None
    return functools.partial(secrets_guard.viewer_may_facet, database, table)


def brings_sql(scope) -> bool:
    """Whether a request carries SQL of its own (`?sql=`, `_where=`), which may run up to
    Datasette's time limit: its queries stay in the SQL threads (ledger_db.inline_queries)."""
    query = scope.get("query_string") or b""
    if not any(part in query for part in (b"sql", b"where", b"%")):  # the common case, fast
        return False
    keys = {key for key, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True)}
    return bool(keys & {"sql", "_where"})


def pinned_database(datasette, path: str) -> str | None:
    """The session database a request will read: pinned so no other request evicts it."""
    catalog = get_state(datasette).catalog
    if path.startswith(SESSION_PAGE_PREFIX):
        segment = path[len(SESSION_PAGE_PREFIX) :].split("/", 1)[0]  # already %-decoded
        session = catalog.get(segment) or catalog.get(segment.removesuffix(".json"))
        return catalog.database_name(session) if session else None
    name = database_segment(path)
    if name in NON_DATABASE_SEGMENTS or name == "_internal":
        return None
    if get_state(datasette).mounter.main_label(name) is not None:
        return None
    return name if catalog.session_for_database(name) else None


def wrap(app, datasette):
    if not get_role(datasette).serving:  # a guest: Datasette as it is (state.Role)
        return app

    async def capsem_asgi(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        path = route_path(datasette, scope)
        if is_own_database_page(datasette, path):
            return await app(scope, receive, send)
        # Error pages render templates; without ASGI lifespan nothing else has started yet.
        await datasette.invoke_startup()
        scope = without_suggestions(datasette, scope, path)
        refused = cheap_refusal(datasette, scope, path)
        if refused is not None:
            return await refused.asgi_send(_with_security_headers(send, path))
        actor = await secrets_guard.request_actor(datasette, scope, receive)
        policy = await secrets_guard.request_policy(
            datasette, actor, scope, receive, is_plugin_page(path)
        )
        token = redaction.policy.set(policy)  # read by the database layer's worker threads
        request_token = request_scope.set(object())  # each file is stat'ed once per request
        counting_token = facets_counting.set([])  # facet counts left to the background
        inline_token = inline_queries.set(not brings_sql(scope))
        suggest_token = facet_suggestion_columns.set(suggestion_columns(datasette, path))
        hide = redaction.hide_free_text.set(
            policy != redaction.OPEN and secrets_guard.hides_free_text(datasette)
        )
        mounter = get_state(datasette).mounter
        pinned = pinned_database(datasette, path)
        if pinned:
            mounter.pin(pinned)
        try:
            return await _handle(app, datasette, path, scope, receive, send, actor)
        finally:
            if pinned:
                mounter.unpin(pinned)
            inline_queries.reset(inline_token)
            facet_suggestion_columns.reset(suggest_token)
            request_scope.reset(request_token)
            facets_counting.reset(counting_token)
            redaction.hide_free_text.reset(hide)
            redaction.policy.reset(token)

    return capsem_asgi
