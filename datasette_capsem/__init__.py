"""datasette-capsem: a Datasette plugin for Capsem's session telemetry.

This module only connects Datasette's hooks to the modules that do the work.
"""

from __future__ import annotations

import functools
import sqlite3

from datasette import hookimpl

from datasette_capsem import permissions
from datasette_capsem.cli import register as register_cli
from datasette_capsem.core_pages import (
    cells,
    core_errors,
    database_page,
    lazy_mount,
    secrets_guard,
)
from datasette_capsem.core_pages.canned_queries import all_queries_for_database, database_kind
from datasette_capsem.errors import CapsemError, Redirect
from datasette_capsem.index import INDEX_DATABASE
from datasette_capsem.index.database import IndexDatabase
from datasette_capsem.memory import limit_malloc_arenas, settle_heap_now_and_then
from datasette_capsem.mount.mounter import refresh_catalog, refresh_schemas
from datasette_capsem.readonly import LedgerUnavailable
from datasette_capsem.state import CapsemState, get_role, get_state
from datasette_capsem.views import guest, opening, render
from datasette_capsem.views.routes import ROUTES


@hookimpl
def startup(datasette):
    if not get_role(datasette).serving:  # a guest: Datasette as it is (state.Role)
        return
    limit_malloc_arenas()
    state = get_state(datasette)
    # Re-check only databases whose files changed, instead of every one on every request, and
    # never fail a request on a Capsem file that cannot be read now. (1.0 refreshes at most
    # once a second, and its permission checks read its catalog of every mounted ledger's
    # tables: its refresh keeps them; 0.65's skips session ledgers.)
    refresh = refresh_catalog if permissions.DATASETTE_1 else refresh_schemas
    datasette._refresh_schemas = functools.partial(refresh, datasette, state.mounter)
    state.mounter.ensure_mains()
    state.catalog.scan_soon()  # a big home's first scan takes seconds: not in the start
    start_index(datasette, state)


def start_index(datasette, state: CapsemState) -> None:
    """The cross-session index: its file created, mounted as `index`, refreshed in the
    background (the list's session table is rebuilt after each refresh)."""
    service = state.index
    try:
        service.ensure_schema()
    except (OSError, sqlite3.Error) as error:
        service.record_error(f"cannot create the index in {service.path}: {error}")
        return
    if INDEX_DATABASE not in datasette.databases:
        datasette.add_database(
            IndexDatabase(datasette, service.path), name=INDEX_DATABASE, route=INDEX_DATABASE
        )
    table = state.session_table
    service.after_refresh.append(lambda: table.rows(state.catalog.snapshot(), service.snapshot()))
    service.after_refresh.append(settle_heap_now_and_then)  # after the list is rebuilt
    service.start_background()


@hookimpl
def asgi_wrapper(datasette):
    return functools.partial(lazy_mount.wrap, datasette=datasette)


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    """Ids as links to the plugin's pages (core_pages/cells.py)."""
    return cells.render_cell(row, value, column, table, database, datasette)


@hookimpl
def register_routes(datasette):
    return ROUTES if get_role(datasette).serving else guest.ROUTES


@hookimpl
def menu_links(datasette, actor, request):
    """A guest's one way in: a link to `/-/capsem` when a Capsem home is on this machine."""
    role = get_role(datasette)
    if role.serving or not role.home_found:
        return None
    return [{"href": datasette.urls.path("/-/capsem"), "label": "Capsem"}]


@hookimpl
def register_commands(cli):
    register_cli(cli)


@hookimpl
def extra_template_vars(datasette, template, database, table, request):
    if not get_role(datasette).serving:
        return {}
    extra = {"capsem_demo": get_state(datasette).settings.demo}
    if request is not None and not lazy_mount.is_own_database_page(
        datasette, lazy_mount.route_path(datasette, request.scope)
    ):
        # Pages under the plugin's CSP: inline scripts other plugins add to every page
        # (datasette-leaflet's settings, say) would be blocked there; leave them off.
        extra["body_scripts"] = []
    capsem_database = bool(database) and database_kind(datasette, database) is not None
    extra["capsem_database"] = capsem_database  # templates/query.html: only Capsem's queries
    if template == "database.html" and capsem_database:
        extra["capsem_session"] = database_page.session_nav(datasette, database)
    if template == "table.html" and capsem_database and table:
        return _with_sort_links(datasette, request, database, table, extra)
    if template and template.startswith("capsem/"):
        # Plugin pages run under a CSP without 'unsafe-eval': scripts other plugins add for
        # Datasette's core pages (datasette-vega's bundle evaluates strings) stay off them.
        extra["extra_js_urls"] = []
    return extra


def _with_sort_links(datasette, request, database: str, table: str, extra: dict):
    """A table page's template vars, with the sort and facet links a reader without
    view_secrets may follow (templates/table.html)."""

    async def inner():
        actor = request.actor if request is not None else None
        if not await permissions.can_view_secrets(datasette, actor):
            registry = lazy_mount.registry_of(datasette, database)
            extra["capsem_sort_links"] = functools.partial(
                secrets_guard.sort_links_for_viewer, registry, table
            )
            extra["capsem_facet_links"] = functools.partial(
                secrets_guard.facet_links_for_viewer, registry, table
            )
        return extra

    return inner


@hookimpl
def handle_exception(datasette, request, exception):
    """Errors raised in Datasette's own views: a ledger that cannot be read
    (`LedgerUnavailable`), or a core parameter Datasette would answer with 500. (Plugin views'
    `CapsemError`s are rendered by `render.answering_errors`, with the same page.)"""
    if not get_role(datasette).serving:
        return None
    if isinstance(exception, LedgerUnavailable):
        exception = render.unreadable(datasette, exception)
    exception = opening.missing_row(datasette, request, exception) or exception
    if not isinstance(exception, (CapsemError, Redirect)):
        return _bad_parameter(datasette, request, exception)

    async def inner():
        return await render.failure(datasette, request, exception)

    return inner


def _bad_parameter(datasette, request, exception):
    """A 4xx instead of Datasette's 500 for a malformed core parameter (core_pages/core_errors.py)."""
    problem = core_errors.classify(request, exception)
    if problem is None:
        return None

    async def inner():
        return await render.error(datasette, request, *problem)

    return inner


@hookimpl
def permission_allowed(datasette, actor, action, resource):
    """Datasette 0.65 asks here (1.0 asks `permission_resources_sql`)."""
    if action != permissions.VIEW_SECRETS:
        return None
    return permissions.view_secrets_from_config(datasette, actor)


@hookimpl
def register_actions(datasette):
    """Datasette 1.0: the plugin's action, `capsem-view-secrets` (permissions.py)."""
    return permissions.actions()


@hookimpl
def permission_resources_sql(datasette, actor, action):
    """Datasette 1.0 asks here (0.65 asks `permission_allowed`)."""
    if action != permissions.VIEW_SECRETS:
        return None
    return permissions.view_secrets_sql(datasette, actor)


@hookimpl
def actor_from_request(datasette, request):
    if not get_role(datasette).serving:
        return None
    header = get_state(datasette).settings.trusted_actor_header
    if not header:
        return None
    value = request.headers.get(header.lower())
    return {"id": value, "via": "trusted-header"} if value else None


@hookimpl
def canned_queries(datasette, database, actor):
    """Capsem's canned queries for main, index and every session database (core_pages/canned_queries.py)."""
    if database_kind(datasette, database) is None:  # a guest's, or a database of the user's
        return None

    # Results first: the SQL behind a "show" toggle (templates/query.html puts it last).
    return all_queries_for_database(datasette, database)
