"""Datasette's own database page of a session ledger links back to the plugin's pages.

`templates/database.html` extends Datasette's default and, when the database is a session,
adds one line under the heading: the session's display name, its overview, its traces and its
integrity check (no inline script: a template block, so the CSP stays strict).
"""

from __future__ import annotations

from typing import Any

from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls


def session_nav(datasette, database: str | None) -> dict[str, Any] | None:
    """{id, name, overview, traces, check} when `database` is a session's ledger, else None."""
    if not database:
        return None
    session = get_state(datasette).catalog.session_for_database(database)
    if session is None:
        return None
    links = Urls.of(datasette).for_session(session.id, database)
    return {
        "id": session.id,
        "name": session.display_name,
        "overview": links.session(),
        "traces": links.session() + "#traces",
        "check": links.check(),
    }
