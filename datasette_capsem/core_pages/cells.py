"""Every id is a link: Datasette's `render_cell` for the ledgers, `main` and `index`.

In canned-query results and Datasette's own table and row pages, the ids Capsem writes link to
the plugin's pages for them: session ids to the overview, trace and turn ids to the trace page,
event ids to the event page, `model_call_id` and a model call's `id` to its model call, tool
call ids to the tool call (its event page), body blob ids to the body. Only the cell's own value
and its row are used; the value is escaped, and the link is built by the one URL builder.

A text cell of Capsem's data longer than `HUGE_CELL_CHARS` is cut, on the row page too (which
Datasette never cuts): its first `truncate_cells_html` characters, "…", and a link to the row's
JSON, which holds the whole value. A 3 MB request preview made a 4.8 MB row page no browser
should have to lay out. The cut ends in "…", so a credential cut there is masked as the whole
token would be (`redaction.CUT`), and for a reader without view_secrets the value is the masked
one already (the row factory); the JSON is masked the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from datasette.utils import path_from_row_pks
from markupsafe import Markup, escape

from datasette_capsem.config import qualify
from datasette_capsem.index import INDEX_DATABASE
from datasette_capsem.redaction import CUT
from datasette_capsem.session.relations import usable_event_id
from datasette_capsem.state import get_role, get_state
from datasette_capsem.urls import Urls

SESSION_COLUMNS = frozenset({"session_id", "owner_id", "inherited_from"})
TRACE_COLUMNS = frozenset({"trace_id", "turn_id"})
CALL_COLUMNS = frozenset({"call_id", "tool_call_id"})
ROW_TABLES = frozenset({"model_calls", "tool_calls", "net_events"})  # `id` -> its event
LEDGER_COLUMNS = TRACE_COLUMNS | CALL_COLUMNS | {"event_id", "model_call_id", "id"}
ALL_COLUMNS = LEDGER_COLUMNS | SESSION_COLUMNS
HUGE_CELL_CHARS = 64 * 1024  # longer text cells are cut on every page, with a link to the whole


def _get(row: Any, name: str) -> Any:
    try:
        return row[name]
    except (KeyError, IndexError, TypeError):
        return None


def _link(href: str, value: Any) -> Markup:
    # An f-string of escaped parts: Markup.format's escaping formatter cost more than the rest
    # of render_cell (~30 linked cells a table page).
    return Markup(f'<a href="{escape(href)}">{escape(value)}</a>')


MASK_MARKERS = ("[redacted:", "[hidden")  # what masking leaves; a cut never splits one


def _head(value: str, size: int) -> str:
    """`value`'s first `size` characters, or up to the end of a masking marker the cut would
    split (a reader is told what was masked, "[redacte…" would not say it)."""
    start = value.rfind("[", max(0, size - 64), size)
    if start >= 0 and value.startswith(MASK_MARKERS, start):
        end = value.find("]", start)
        size = max(size, end + 1)
    return value[:size]


async def _huge_cell(row, value: str, table: str, database: str, datasette) -> Markup | None:
    """A huge text cell's head, "…" and a link to its row's JSON (the whole value); None (the
    whole value, as Datasette shows it) for a row without a single primary key or rowid."""
    pks = await datasette.get_database(database).primary_keys(table)
    if len(pks) > 1 or (not pks and _get(row, "rowid") is None):
        return None
    row_url = Urls.of(datasette).row(database, table, path_from_row_pks(row, pks, not pks, False))
    shown = datasette.setting("truncate_cells_html") or HUGE_CELL_CHARS
    return Markup(
        f'{escape(_head(value, shown))}{CUT} <a class="capsem-whole-value" href="{escape(row_url)}.json">'
        f"the whole value: {len(value):,} characters, in the row's JSON</a>"
    )


def render_cell(row, value, column, table, database, datasette) -> Markup | Awaitable | None:
    if isinstance(value, str) and len(value) > HUGE_CELL_CHARS:
        role = get_role(datasette)
        if role.serving and database not in role.own_databases:  # Capsem's data only
            return _huge_cell(row, value, table, database, datasette)
        return None
    if column not in ALL_COLUMNS or value is None or isinstance(value, (bytes, float)):
        return None
    if isinstance(value, str) and (not value or len(value) > 256):
        return None
    role = get_role(datasette)
    if not role.serving or database in role.own_databases:  # not Capsem's data
        return None
    state = get_state(datasette)
    urls = Urls.of(datasette)
    home = state.mounter.main_label(database)  # None unless a main.db
    if column in SESSION_COLUMNS or (home is not None and table == "sessions" and column == "id"):
        # A labelled home's main.db holds its bare ids; the index holds addresses.
        address = qualify(home, str(value)) if home else str(value)
        if (database == INDEX_DATABASE or home is not None) and state.catalog.get(address):
            return _link(urls.session(address), escape(value))
        return None
    if database == INDEX_DATABASE or home is not None:
        return None
    session = state.catalog.session_for_database(database)
    if session is None:
        return None
    links = urls.for_session(session.id, database)
    text = escape(value)
    if column in TRACE_COLUMNS:
        return _link(links.trace(str(value)), text)
    if column == "event_id":
        event = usable_event_id(value)
        return _link(links.event(event), text) if event else None
    if column == "model_call_id" and isinstance(value, int):
        return _link(links.ledger_row("model_calls", value), text)
    if column in CALL_COLUMNS and isinstance(value, str):
        trace = _get(row, "trace_id")
        model_call = _get(row, "model_call_id") if table == "tool_responses" else None
        return _link(links.tool_call(value, trace, model_call), text)
    if column == "id" and isinstance(value, int):
        if table in ROW_TABLES:
            return _link(links.ledger_row(table, value), text)
        if table == "event_body_blobs" and usable_event_id(_get(row, "event_id")):
            return _link(links.body(_get(row, "event_id"), value), text)
    return None
