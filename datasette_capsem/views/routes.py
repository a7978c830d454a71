"""Every route of the plugin, by direct reference (regex, view): first match wins.

Each view raises `CapsemError`/`Redirect` for what it cannot answer; `render.answering_errors`
renders them, the one place plugin pages turn errors into pages.
"""

from __future__ import annotations

from datasette_capsem.views import (
    checks,
    compare,
    costs,
    event,
    findings,
    follow,
    home,
    render,
    resolve,
    search,
    security,
    session,
    timeline,
    trace,
)

# Order matters only where two patterns could match the same path: first wins.
ROUTES: list[tuple[str, object]] = [
    (pattern, render.answering_errors(view))
    for module in (
        home,
        findings,
        follow,
        resolve,
        session,
        timeline,
        trace,
        event,
        search,
        security,
        checks,
        compare,
        costs,
    )
    for pattern, view in module.ROUTES
]
