"""Wiring of the index into a Datasette instance: service, mounted database, session table."""

from __future__ import annotations

import sqlite3

from datasette_capsem.index.database import INDEX_DATABASE, IndexDatabase
from datasette_capsem.state import get_state


def start(datasette) -> None:
    """At startup: create the index file, mount it as `index`, refresh it in the background."""
    state = get_state(datasette)
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
    service.start_background()
