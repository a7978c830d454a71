"""The session list (`/`, `/-/capsem`, `/-/capsem/sessions.json`) and its chart data.

Page, JSON and charts take the same parameters (see index/filters.py) and read only in-memory
state: the catalog snapshot and the index snapshot, joined once per change by SessionTable.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any
from urllib.parse import urlencode

from datasette.utils.asgi import Response
from markupsafe import Markup

from datasette_capsem import errors, permissions, redaction
from datasette_capsem.catalog import CatalogSnapshot
from datasette_capsem.findings import KINDS as FINDING_KINDS
from datasette_capsem.index import charts, filters, fts
from datasette_capsem.index.listing import FIGURES, SORTABLE
from datasette_capsem.index.service import IndexSnapshot
from datasette_capsem.memory import trim_malloc
from datasette_capsem.state import get_role, get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import costs, render
from datasette_capsem.views.search import text_kinds

# (column, heading) of the page's table; figures carry their source.
COLUMNS = (
    ("id", "Session"),
    ("name", "Name"),
    ("verdict", "Verdict"),
    ("kind", "Kind"),
    ("status", "Status"),
    ("created", "Created"),
    ("duration", "Dur"),
    ("cost", "Cost"),
    ("requests", "Net"),
    ("tokens", "Tokens"),
    ("tool_calls", "Tools"),
    ("mcp_calls", "MCP"),
    ("file_events", "Files"),
    ("has_ledger", "Ledger"),
)


PAGING = ("_next", "_size", "_sort", "_sort_desc")
# How long a request waits for a scan of the home another thread is making (the first after
# a start, or after main.db changed) before answering from the previous scan, or, before the
# first, saying the sessions are being read. A small home's scan takes milliseconds.
CATALOG_WAIT_SECONDS = 0.5
HOME_COLUMN = ("home", "Home")


def url_with(request, **changes: Any) -> str:
    """This page's query string with some parameters replaced (None removes one)."""
    pairs = [(k, v) for k, v in _pairs(request) if k not in changes]
    pairs += [(k, v) for k, v in changes.items() if v is not None]
    return "?" + urlencode(pairs) if pairs else request.path


def _pairs(request) -> list[tuple[str, str]]:
    return [(key, value) for key in request.args for value in request.args.getlist(key)]


async def _require_view(datasette, request) -> None:
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()


async def _filtered(datasette, request):
    """(state, query, filtered rows, index snapshot); a `CapsemError` for a bad request."""
    await _require_view(datasette, request)
    state = get_state(datasette)
    try:
        query = filters.parse_query(
            request.args,
            default_size=datasette.setting("default_page_size"),
            max_size=datasette.setting("max_returned_rows"),
        )
    except filters.BadParameter as problem:
        raise errors.bad_parameter("Bad parameter", str(problem)) from problem
    if query.text is not None:
        query.text_sessions = await _text_sessions(state, query)
    # Neither the index's figures nor a big list are read or built inside a request: until
    # they are ready the page shows what there is and says so (built.partial).
    table = state.session_table
    catalog = state.catalog.snapshot(wait=CATALOG_WAIT_SECONDS)
    if catalog is None:  # the first scan after a start is still reading the home
        built = table.scanning()
        return state, query, [], IndexSnapshot(), built, CatalogSnapshot()
    wait = len(catalog.sessions) <= table.build_in_request_up_to
    index = state.index.snapshot(wait=wait)
    built = table.rows(catalog, index, wait=wait)
    rows = table.filtered(
        built,
        (query.sort, query.descending),
        query.signature(),
        lambda ordered: filters.apply(ordered, query),
    )
    return state, query, rows, index, built, catalog


async def _text_sessions(state, query: filters.ListQuery) -> frozenset[str]:
    """The sessions the list's `matching` query has hits in (the search page's grouping, with the
    same restriction of kinds for a reader who may not see free text); a 400 for a query the
    full-text index cannot read."""
    kinds = text_kinds(tuple(query.text_kinds))
    wanted = fts.TextFilters(kinds=kinds)
    try:
        counts = await asyncio.get_running_loop().run_in_executor(
            None, lambda: state.index.text_sessions(query.text, wanted)
        )
    except fts.QuerySyntaxError as problem:
        raise errors.bad_parameter("Bad text filter", str(problem)) from problem
    return frozenset(row["session_id"] for row in counts.sessions)


# The cost box's figures by index file (path -> (its stat, the box)): a pass over every
# ledger's model usage, about 60 ms at 3,000 ledgers and ten times that at 30,000, made once
# per write of the index file, not once per page of a list that is not whole yet.
_COST_BOXES: dict[str, tuple[tuple, dict[str, Any]]] = {}
_COST_THREADS: dict[str, threading.Thread] = {}


def _index_file_key(path) -> tuple:
    found = []
    for name in (str(path), f"{path}-wal"):
        try:
            stat = os.stat(name)
        except OSError:
            found.append(None)
        else:
            found.append((stat.st_mtime_ns, stat.st_size))
    return tuple(found)


def _read_cost_box(path, key: tuple) -> dict[str, Any]:
    found = costs.home_summary(path)
    _COST_BOXES[str(path)] = (key, found)
    # SQLite's sorter and distinct sets of that pass (megabytes at 30,000 ledgers), freed in
    # this thread's malloc arena: handed back (a few ms, once per write of the index file)
    trim_malloc()
    return found


async def _cost_summary(state, built) -> dict[str, Any] | None:
    """The box of total cost and cost by model (every indexed session, not the filters'),
    read once per list build (a catalog or index change makes a new one) and write of the
    index file. While the list is not whole (a big home just started) the page does not
    wait for it: the box is left out until a thread has read it."""
    found = built.rendered.get(("costs",))
    if found is not None:
        return found
    path = state.index.path
    key = _index_file_key(path)
    known = _COST_BOXES.get(str(path))
    if known is not None and known[0] == key:
        found = known[1]
    elif built.partial:
        thread = _COST_THREADS.get(str(path))
        if thread is None or not thread.is_alive():
            thread = threading.Thread(
                target=_read_cost_box, args=(path, key), name="capsem-cost-box", daemon=True
            )
            _COST_THREADS[str(path)] = thread
            thread.start()
        return None
    else:
        found = await asyncio.get_running_loop().run_in_executor(
            None, lambda: _read_cost_box(path, key)
        )
    built.remember(("costs",), found)
    return found


async def _rows_html(datasette, built, query: filters.ListQuery, shown: list[dict]) -> Markup:
    """The HTML of the shown rows, rendered once per list build (catalog scan and index
    generation), filter, page and credential policy: most of the page's cost (a profile of
    `/` at 10,000 sessions: about 90 % Jinja rendering of the rows)."""
    key = (
        "html",
        (query.sort, query.descending),
        query.signature(),
        query.offset,
        query.size,
        redaction.policy.get(),
    )
    found = built.rendered.get(key)
    if found is None:
        environment = permissions.jinja_environment(datasette)
        template = environment.get_template(f"{render.TEMPLATE_DIR}/_session_rows.html")
        found = Markup(await template.render_async(sessions=render.redacted(shown)))
        built.remember(key, found)
    return found


def _under_base(datasette, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The shown rows with their links under base_url: the listing builds them root-relative,
    once for every reader and for the CLI, so a page behind a proxy prefixes its own."""
    base = Urls.of(datasette).base
    if base == "/":
        return rows

    def at(href: str | None) -> str | None:
        return base + href.lstrip("/") if href else href

    return [
        {
            **row,
            "href": at(row.get("href")),
            "database_href": at(row.get("database_href")),
            "verdict": {**row["verdict"], "href": at(row["verdict"].get("href"))},
            **({"home_href": at(row["home_href"])} if "home_href" in row else {}),
        }
        for row in rows
    ]


def _home_facet(built, request, query: filters.ListQuery, rows) -> list[dict[str, Any]]:
    """The `home` facet of the filtered rows: each label's count and a link toggling it;
    counted once per list build and filter (a pass over every session otherwise)."""
    chosen = set(query.homes)
    facet = []
    key = ("home facet", query.signature())
    counts = built.rendered.get(key)
    if counts is None:
        counts = filters.home_facet(rows)
        built.remember(key, counts)
    for label, count in counts:
        others = [h for h in query.homes if h != label]
        value = ",".join(others if label in chosen else [*query.homes, label]) or None
        facet.append(
            {
                "value": label,
                "count": count,
                "selected": label in chosen,
                "href": url_with(request, home=value, _next=None),
            }
        )
    return facet


def _sort_links(request, query: filters.ListQuery) -> dict[str, str]:
    links = {}
    for column in SORTABLE:
        descending = not (query.sort == column and query.descending)
        key, other = ("_sort_desc", "_sort") if descending else ("_sort", "_sort_desc")
        links[column] = url_with(request, **{key: column, other: None, "_next": None})
    return links


async def home(datasette, request):
    result = await _filtered(datasette, request)
    state, query, rows, _index, built, snapshot = result
    page_rows = state.session_table.full_rows(rows[query.offset : query.offset + query.size])
    shown = _under_base(datasette, page_rows)
    next_offset = query.offset + query.size
    next_token = str(next_offset) if next_offset < len(rows) else None
    context = {
        "sessions": shown,
        "total": len(snapshot.sessions),
        "filtered": len(rows),
        "offset": query.offset,
        "size": query.size,
        "next": next_token,
        "next_url": url_with(request, _next=next_token) if next_token else None,
        "sort": query.sort,
        "sort_desc": query.descending,
        "filters": query.applied(),
        "index": state.index.freshness(),
        "problems": snapshot.problems,
        "capsem_home": str(state.settings.capsem_home),
        "home_exists": snapshot.home_exists,
        # Not the whole current list yet (a big home just started): what this one holds.
        "partial": built.partial,
    }
    if state.catalog.labelled:  # labelled homes: each one's state, and the `home` facet
        context["homes"] = [home.as_json() for home in snapshot.homes.values()]
        context["facets"] = {"home": _home_facet(built, request, query, rows)}
    if render.wants_json(request):
        return render.json_response(context)
    page_context = {
        **{key: value for key, value in context.items() if key != "sessions"},
        "columns": (HOME_COLUMN, *COLUMNS) if state.catalog.labelled else COLUMNS,
        "figures": tuple(FIGURES),
        "sort_links": _sort_links(request, query),
        "args": {key: request.args.get(key) for key in request.args},
        "text_kinds": request.args.getlist("matching_kind"),
        "kinds": filters.KINDS,
        "finding_kinds": sorted(FINDING_KINDS),
        "chart_query": urlencode([(k, v) for k, v in _pairs(request) if k not in PAGING]),
        "charts_note": charts.partial_note(built.partial),
    }
    page_context = render.redacted(page_context)
    page_context["own_databases"] = [  # a mixed instance: the user's databases, listed too
        name
        for name in sorted(get_role(datasette).own_databases)
        if await permissions.can_view_database(datasette, request.actor, name)
    ]
    page_context["rows_html"] = await _rows_html(datasette, built, query, shown)
    page_context["costs"] = render.redacted(await _cost_summary(state, built))
    html = await datasette.render_template(
        f"{render.TEMPLATE_DIR}/home.html", page_context, request=request
    )
    return Response.html(html)


async def usage_chart(datasette, request):
    """Tokens and cost per day by provider over the filtered sessions' ledgers."""
    result = await _filtered(datasette, request)
    _state, _query, rows, index, built, _catalog = result
    return render.json_response(charts.answer(charts.usage_per_day(rows, index), built.partial))


async def sessions_chart(datasette, request):
    """Sessions created per day and kind, over the filtered sessions."""
    result = await _filtered(datasette, request)
    built = result[4]
    return render.json_response(charts.answer(charts.sessions_per_day(result[2]), built.partial))


async def index_freshness(datasette, request):
    await _require_view(datasette, request)
    return render.json_response(get_state(datasette).index.freshness())


ROUTES = [
    (r"^/$", home),
    (r"^/-/capsem/?$", home),
    (r"^/-/capsem/sessions\.json$", home),
    (r"^/-/capsem/charts/usage\.json$", usage_chart),
    (r"^/-/capsem/charts/sessions\.json$", sessions_chart),
    (r"^/-/capsem/index\.json$", index_freshness),
]
