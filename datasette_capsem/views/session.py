"""`/-/capsem/sessions/<id>`: one session at a glance (opening a session: views/opening.py).

The overview answers "what is in this session and is it sound": identity, status, era, row
counts, providers, the integrity verdict and the traces, newest first. A session whose ledger
is gone (a stopped ephemeral VM, spec §1.4) or unreadable still gets its page, from main.db.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

from datasette_capsem import redaction
from datasette_capsem.core_pages import secrets_guard
from datasette_capsem.graph.exchanges import is_ambient
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.session import overview, stats
from datasette_capsem.urls import Urls
from datasette_capsem.views import pending, render, trace_cache
from datasette_capsem.views.follow import follow_context
from datasette_capsem.views.integrity import integrity, report_held
from datasette_capsem.views.opening import Opened, open_session, page_bounds

log = logging.getLogger(__name__)


# -- integrity ---------------------------------------------------------------------------


# -- following a live ledger ------------------------------------------------------------


# -- the overview page -------------------------------------------------------------------


def _overview_data(opened: Opened, offset: int, size: int):
    schema = opened.schema

    def read(conn) -> dict[str, Any]:
        traces = overview.traces_page(conn, schema, offset, size)
        overview.turn_previews(conn, schema, traces["traces"])
        return {
            "counts": overview.table_counts(conn, schema),
            "providers": overview.providers(conn, schema),
            "traces": traces,
            "ambient_traces": overview.ambient_traces(conn, schema),
            "mcp_rows": overview.legacy_mcp_rows(conn, schema),
            "stats": stats.session_stats(conn, schema),
        }

    return read


def _era_notes(schema: LedgerSchema) -> list[str]:
    notes = []
    if not schema.has("model_calls", "event_id"):
        notes.append("This file predates event ids (2026-06-06): no security or body joins.")
    if "model_items" not in schema.tables:
        notes.append("This file predates model_items (2026-06-14).")
    if "mcp_calls" in schema.tables:
        notes.append("MCP calls of this file live in the legacy mcp_calls table (shown below).")
    if schema.legacy_tables:
        notes.append("Legacy tables present: " + ", ".join(schema.legacy_tables) + ".")
    return notes


def _trace_links(opened: Opened, traces: list[dict], urls: Urls) -> list[dict]:
    for trace in traces:
        trace_id, exchange = str(trace["trace_id"]), trace.get("exchange")
        trace["ambient"] = is_ambient(trace_id)
        if trace.get("continues"):  # the turn the writer split this trace from (spec §4.4)
            continued = trace["continues"]
            continued["href"] = opened.links.trace(str(continued["trace_id"]))
        trace["href"] = (
            opened.links.exchange(trace_id, exchange)
            if exchange is not None
            else opened.links.trace(trace_id)
        )
        if exchange is None and not trace["ambient"]:  # a turn: ticked or chosen to compare
            value = f"{opened.session.id}:{trace_id}"
            trace["compare"] = {
                "value": value,
                "href": urls.plugin("/compare") + "?" + urlencode({"a": value}),
            }
    return traces


def _stats_links(opened: Opened, sections: list[dict]) -> list[dict]:
    """Each figure of the summaries links to the rows it counts (Datasette's table page with
    the figure's filters); each latest row to its row page. For a reader who may not see
    secrets, a figure filtered on a column not shown raw (an MCP server's name may be a URL
    with a password) gets no link: its value would sit in the href, and the filter would be
    refused anyway."""
    links = opened.links
    viewer = redaction.policy.get() != redaction.OPEN

    def href(table: str, filters: dict[str, Any]) -> str | None:
        if viewer and not all(
            secrets_guard.viewer_may_filter("ledger", table, key, [str(value)])
            for key, value in filters.items()
        ):
            return None
        return links.table(table, **filters)

    for section in sections:
        for figure in section["figures"]:
            figure["href"] = href(figure["table"], figure["filters"])
        for group in section["groups"]:
            for row in group["rows"]:
                row["href"] = href(row["table"], row["filters"])
                if viewer and group["column"] in row["filters"]:  # a value, not "(none)"
                    # the value counted, as this reader sees that column (hidden, masked)
                    shown = {group["column"]: row["label"]}
                    row["label"] = redaction.project_row("ledger", row["table"], shown)[
                        group["column"]
                    ]
                    row["filters"] = redaction.project_row("ledger", row["table"], row["filters"])
        for listing in section["lists"]:
            for row in listing["rows"]:
                row["href"] = links.row(listing["table"], row["id"])
    return sections


def _base_context(datasette, opened: Opened, offset: int, size: int) -> dict[str, Any]:
    """What the page shows from the catalog alone (main.db row, registry, paths)."""
    session = opened.session
    return {
        "session": session.summary(),
        "display_name": session.display_name,
        "main_row": dict(session.main_row) if session.main_row is not None else None,
        "links": {
            "session": opened.links.session(),
            "database": opened.links.database_url(),
            "compare": Urls.of(datasette).plugin("/compare"),
        },
        "ledger": str(session.ledger_path) if session.ledger_path else None,
        "problem": opened.problem.describe() if opened.problem else None,
        "era": None,
        "schema": None,
        "notes": [],
        "counts": {},
        "providers": [],
        "traces": [],
        "traces_total": 0,
        "ambient_traces": [],
        "mcp_rows": [],
        "stats": [],
        "offset": offset,
        "size": size,
        "next": None,
    }


def _answer(offset: int, size: int) -> str:
    return f"overview|{offset}|{size}"


async def _ledger_context(datasette, opened: Opened, offset: int, size: int) -> dict[str, Any]:
    """What the page shows from the ledger: counts, providers, traces, legacy MCP rows. Their
    aggregates read the whole file, so they are read once per file version and page of turns
    (views/trace_cache.cached_data), not on every view."""

    async def build() -> dict[str, Any]:
        return await opened.db.execute_fn(_overview_data(opened, offset, size))

    data = await trace_cache.cached_data(datasette, opened, _answer(offset, size), build)
    urls = Urls.of(datasette)
    traces = data.pop("traces")
    _trace_links(opened, data["ambient_traces"], urls)
    _stats_links(opened, data["stats"])
    return {
        **data,
        "era": opened.schema.era,
        "schema": opened.schema.summary(),
        "notes": _era_notes(opened.schema) + traces["notes"],
        "traces": _trace_links(opened, traces["traces"], urls),
        "traces_total": traces["total"],
        "turns": traces.get("turns", 0),
        "user_turns": traces.get("user_turns", traces.get("turns", 0)),
        "exchanges": traces.get("exchanges", 0),
        "next": offset + size if offset + size < traces["total"] else None,
    }


async def session_page(datasette, request):
    opened = await open_session(datasette, request, need_ledger=False)
    offset, size = page_bounds(request)
    context = _base_context(datasette, opened, offset, size)
    if opened.db is not None:
        # A big ledger's first view (per file version) answers at once while its summary is
        # read in the background (views/pending.py); the page reloads itself.
        held = trace_cache.data_held(datasette, opened, _answer(offset, size))
        found = await pending.within_wait(
            opened, _ledger_context(datasette, opened, offset, size), held
        )
        if pending.pending(found):
            pending.in_background(integrity(datasette, opened))
            what = "This session's summary (row counts, turns, Stats) is being read"
            return await pending.page(datasette, request, opened, what, "Session overview")
        context.update(found)
    elif not opened.session.has_ledger:
        context["notes"].append(
            "No session.db on disk: Capsem deletes the directory of a stopped ephemeral "
            "session, so main.db's row is all that remains."
        )
    verdict = integrity(datasette, opened, counts=context["counts"] or None)
    context["integrity"] = await pending.within_wait(
        opened, verdict, report_held(datasette, opened)
    )
    if pending.pending(context["integrity"]):  # a big ledger's quick check, not stored yet
        message = "being checked in the background: reload the page for the verdict"
        context["integrity"] = {"available": False, "verdict": None, "message": message}
    context["follow"] = await follow_context(datasette, opened)
    return await render.page(datasette, request, "session.html", context)


ROUTES = [
    (r"^/-/capsem/sessions/(?P<session_id>[^/]+?)(?P<format>\.json)?$", session_page),
]
