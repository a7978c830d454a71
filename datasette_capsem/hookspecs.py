"""The extension points of datasette-capsem, as pluggy hook specifications.

Checks and canned queries are the two things users most want to add for their own agents and
policies, so both are plugins: the built-in ones register through these same hooks, and a
third-party package adds its own by implementing them and declaring an entry point in the
``datasette_capsem`` group (see docs/extending.md).
"""

from __future__ import annotations

import pluggy

PROJECT = "datasette_capsem"
ENTRY_POINT_GROUP = PROJECT

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def capsem_checks():
    """Return an iterable of checks (``datasette_capsem.checks.Check`` objects).

    Each check says which tables and columns it needs; the engine runs it only on files that
    have them and reports it as not applicable elsewhere.
    """


@hookspec
def capsem_queries():
    """Return an iterable of ``datasette_capsem.queries.QuerySpec`` objects.

    Each spec names the database kinds it applies to (``session``, ``main``, ``index``) and the
    tables and columns it needs; it is offered as a canned query wherever both match.
    """
