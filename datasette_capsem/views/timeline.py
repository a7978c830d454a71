"""`/-/capsem/sessions/<id>/timeline` (and `.json`): every exec, tool, net, fs and model row of
a session in time order, filterable by layer (`layer`, repeatable), time (`since`, `until`)
and trace (`trace_id`), paged with `_size` (up to 1,000) and `_next`, with no cap on the
total. Each row links to its event page (a row with an event id), else its row page.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from datasette_capsem import errors
from datasette_capsem.graph.values import usable_event_id
from datasette_capsem.session.timeline import LAYERS, MAX_PAGE, TimelineQuery, timeline
from datasette_capsem.views import pending, render, trace_cache
from datasette_capsem.views.integrity import big_ledger
from datasette_capsem.views.opening import Opened, bad_value, open_session

DEFAULT_PAGE = 200
_WHEN = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?Z?)?")
_PAGE = f"_size must be an integer from 1 to {MAX_PAGE}, _next an integer from 0"


def _query(request) -> TimelineQuery:
    args = request.args
    layers = tuple(dict.fromkeys(x for x in args.getlist("layer") if x)) or LAYERS
    unknown = [x for x in layers if x not in LAYERS]
    if unknown:
        raise errors.bad_parameter(
            "Bad timeline filter", f"Unknown layer {unknown[0]!r}; layers are {', '.join(LAYERS)}."
        )
    for name in ("since", "until"):
        value = args.get(name)
        if value and not _WHEN.fullmatch(value):
            raise errors.bad_parameter(
                "Bad timeline filter", f"{name} must be a date (2026-07-01) or an ISO time."
            )
    trace_id = args.get("trace_id") or None
    if trace_id and bad_value(trace_id, "trace id"):
        raise errors.bad_parameter("Bad timeline filter", bad_value(trace_id, "trace id"))
    raw_size, raw_next = args.get("_size") or str(DEFAULT_PAGE), args.get("_next") or "0"
    if not (raw_size.isdigit() and raw_next.isdigit()) or len(raw_size + raw_next) > 14:
        raise errors.bad_parameter("Bad pagination", _PAGE)
    size, offset = int(raw_size), int(raw_next)
    if not 1 <= size <= MAX_PAGE:
        raise errors.bad_parameter("Bad pagination", _PAGE)
    return TimelineQuery(
        layers=layers,
        since=(args.get("since") or "").replace(" ", "T") or None,
        until=(args.get("until") or "").replace(" ", "T") or None,
        trace_id=trace_id,
        offset=offset,
        size=size,
    )


async def _timeline_data(datasette, opened: Opened, query: TimelineQuery) -> Any:
    """One page of the timeline. Its count and order read every row of the layers (`O(R log
    R)`: seconds on a big ledger), so a big ledger's page is kept per file version and query
    (views/trace_cache.cached_data) and, when not held, answers at once (pending) while it is
    read; a smaller ledger's is read on each view, as before."""
    schema = opened.schema

    async def build() -> dict[str, Any]:
        return await opened.db.execute_fn(lambda conn: timeline(conn, schema, query))

    if not big_ledger(opened):
        return await build()
    answer = f"timeline|{query!r}"
    held = trace_cache.data_held(datasette, opened, answer)
    # The whole timeline's pages (every layer, the default page size) are at most rows / size
    # and are stored; any other query (a time range, a trace id, a layer set, a size or an
    # offset the reader chooses) is kept in memory only, so requests cannot fill the disk.
    persist = query == replace(TimelineQuery(), offset=query.offset, size=DEFAULT_PAGE) and (
        query.offset % query.size == 0
    )
    computing = trace_cache.cached_data(datasette, opened, answer, build, persist=persist)
    return await pending.within_wait(opened, computing, held)


async def timeline_page(datasette, request):
    opened = await open_session(datasette, request, need_ledger=True)
    query = _query(request)
    data = await _timeline_data(datasette, opened, query)
    if pending.pending(data):
        what = "This page of the session's timeline is being read"
        return await pending.page(datasette, request, opened, what, "Timeline")
    links = opened.links
    for row in data["rows"]:
        row["href"] = (
            links.event(str(row["event_id"]))
            if usable_event_id(row["event_id"])
            else links.row(row["table"], row["row_id"])
        )
        row["trace_href"] = links.trace(str(row["trace_id"])) if row["trace_id"] else None
    base = links.session() + "/timeline"
    kept = [(k, v) for k in request.args for v in request.args.getlist(k) if k != "_next"]
    following = query.offset + query.size
    context: dict[str, Any] = {
        "session": opened.session.summary(),
        "display_name": opened.session.display_name,
        "links": {"session": links.session(), "json": base + ".json"},
        **data,
        "filters": {
            "layer": list(query.layers),
            "since": query.since,
            "until": query.until,
            "trace_id": query.trace_id,
        },
        "all_layers": list(LAYERS),
        "offset": query.offset,
        "size": query.size,
        "next": f"{base}?{urlencode([*kept, ('_next', following)])}"
        if following < data["total"]
        else None,
    }
    return await render.page(datasette, request, "timeline.html", context)


ROUTES = [
    (r"^/-/capsem/sessions/(?P<session_id>[^/]+)/timeline(?P<format>\.json)?$", timeline_page),
]
