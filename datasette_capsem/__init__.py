"""datasette-capsem: a Datasette plugin for Capsem's session telemetry.

This module only connects Datasette's hooks to the modules that do the work.
"""

from __future__ import annotations

import functools

from datasette import hookimpl

from datasette_capsem import permissions
from datasette_capsem.errors import CapsemError, Redirect
from datasette_capsem.index import INDEX_DATABASE, index_queries
from datasette_capsem.index import plugin as index_plugin
from datasette_capsem.memory import limit_malloc_arenas
from datasette_capsem.mount.mounter import refresh_schemas
from datasette_capsem.mount.readonly import LedgerUnavailable
from datasette_capsem.state import get_state
from datasette_capsem.views import all_routes, core_errors, lazy_mount, render


@hookimpl
def startup(datasette):
    limit_malloc_arenas()
    state = get_state(datasette)
    # Re-check only databases whose files changed, instead of every one on every request.
    datasette._refresh_schemas = functools.partial(refresh_schemas, datasette, state.mounter)
    state.mounter.ensure_main()
    # The cross-session index: mounted as `index`, refreshed in a background thread.
    index_plugin.start(datasette)


@hookimpl
def asgi_wrapper(datasette):
    return functools.partial(lazy_mount.wrap, datasette=datasette)


@hookimpl
def register_routes(datasette):
    return all_routes()


@hookimpl
def register_commands(cli):
    from datasette_capsem.cli import register

    register(cli)


@hookimpl
def extra_template_vars(datasette, template):
    extra = {"capsem_demo": get_state(datasette).settings.demo}
    if template and template.startswith("capsem/"):
        # Plugin pages run under a CSP without 'unsafe-eval': scripts other plugins add for
        # Datasette's core pages (datasette-vega's bundle evaluates strings) stay off them.
        extra["extra_js_urls"] = []
    return extra


@hookimpl
def handle_exception(datasette, request, exception):
    """The one place errors become pages: a view's `CapsemError` or `Redirect`, a ledger that
    cannot be read (`LedgerUnavailable`), or a core parameter Datasette would answer with 500."""
    if isinstance(exception, LedgerUnavailable):
        exception = render.unreadable(datasette, exception)
    if not isinstance(exception, (CapsemError, Redirect)):
        return _bad_parameter(datasette, request, exception)

    async def inner():
        return await render.failure(datasette, request, exception)

    return inner


def _bad_parameter(datasette, request, exception):
    """A 4xx instead of Datasette's 500 for a malformed core parameter (views/core_errors.py)."""
    problem = core_errors.classify(request, exception)
    if problem is None:
        return None

    async def inner():
        return await render.error(datasette, request, *problem)

    return inner


@hookimpl
def permission_allowed(datasette, actor, action, resource):
    if action != permissions.VIEW_SECRETS:
        return None
    return permissions.view_secrets_from_config(datasette, actor)


@hookimpl
def actor_from_request(datasette, request):
    header = get_state(datasette).settings.trusted_actor_header
    if not header:
        return None
    value = request.headers.get(header.lower())
    return {"id": value, "via": "trusted-header"} if value else None


@hookimpl
def canned_queries(datasette, database, actor):
    """Capsem's canned queries for main, index and every session database (queries/hook.py)."""
    from datasette_capsem.queries.hook import canned_queries_for_database

    async def inner():
        found = index_queries() if database == INDEX_DATABASE else {}
        found.update(await canned_queries_for_database(datasette, database))
        return found

    return inner()
