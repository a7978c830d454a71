"""Wiring of the index into a Datasette instance: service, mounted database, session table."""

from __future__ import annotations

import sqlite3

from datasette_capsem.index.database import INDEX_DATABASE, IndexDatabase
from datasette_capsem.index.listing import SessionTable
from datasette_capsem.index.service import IndexService
from datasette_capsem.state import CapsemState, get_state

INDEX_SERVICE = "index"
SESSION_TABLE = "session_table"


def index_service(state: CapsemState) -> IndexService:
    """The instance's index service (created on first use, never refreshed here)."""
    service = state.services.get(INDEX_SERVICE)
    if service is None:
        service = state.services.setdefault(
            INDEX_SERVICE, IndexService(state.settings, state.catalog)
        )
    return service


def session_table(state: CapsemState) -> SessionTable:
    table = state.services.get(SESSION_TABLE)
    if table is None:
        table = state.services.setdefault(SESSION_TABLE, SessionTable(state.catalog.database_name))
    return table


def start(datasette) -> None:
    """At startup: create the index file, mount it as `index`, refresh it in the background."""
    state = get_state(datasette)
    service = index_service(state)
    try:
        service.ensure_schema()
    except (OSError, sqlite3.Error) as error:
        service.record_error(f"cannot create the index in {service.path}: {error}")
        return
    if INDEX_DATABASE not in datasette.databases:
        datasette.add_database(
            IndexDatabase(datasette, service.path), name=INDEX_DATABASE, route=INDEX_DATABASE
        )
    table = session_table(state)
    service.after_refresh.append(lambda: table.rows(state.catalog.snapshot(), service.snapshot()))
    service.start_background()
