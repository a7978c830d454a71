"""`/-/capsem/security` (+ `.json`): what policy stopped or flagged across sessions.

Read from the cross-session index (`policy_events`, filled by the refresh from every ledger,
a fork's copied rows counted once): denied domains (HTTP and DNS), blocked tools, security
detections and credential broker events, per day and category, per session and per subject.
Filters: `since` and `until` (days, YYYY-MM-DD), `days` (the last N days, today included),
`latest` (the N days ending on the newest day with an event: the home page's link, never
empty while there is data) and `category`. Domains, tools and rules are ledger values: escaped, and masked by the
credential policy like every page's data. Each per-session row links to the ledger rows it
summarises (Datasette's table page of the session's database, filtered as the extraction
selected them, every day), one link per table the index read them from.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta, timezone

from datasette_capsem import errors, permissions
from datasette_capsem.index import store
from datasette_capsem.index.extract import POLICY_CATEGORIES
from datasette_capsem.sqlfiles import load_sql
from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import render

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_DAYS = 100_000
# Per category, the Datasette table filters that select what index/sql/ledger_policy_*.sql
# count, in each table the category is read from (tool rows with only a policy_action 'block'
# are left out: Datasette's filters cannot OR).
CATEGORY_FILTERS = {
    "denied_domain": {"decision": "denied"},
    "blocked_tool": {"decision__in": "denied,blocked"},
    "detection": {"detection_level__not": "none"},
    "credential": {},
}


def _day_count(args, name: str) -> int | None:
    value = args.get(name) or None
    if value is None:
        return None
    if not value.isdigit() or not 1 <= int(value) <= MAX_DAYS:
        raise errors.bad_parameter("Bad filter", f"{name} must be a whole number of days.")
    return int(value)


def _newest_day(index) -> str | None:
    """The newest day with a policy event (by_day comes newest first), or None."""
    days = [r["day"] for r in index.security()["by_day"] if r["day"]]
    return max(days) if days else None


def _filters(request, index) -> dict:
    args = request.args
    since, until = args.get("since") or None, args.get("until") or None
    for name, value in (("since", since), ("until", until)):
        if value is not None and not _DAY.fullmatch(value):
            raise errors.bad_parameter("Bad filter", f"{name} must be a day: 2026-07-01.")
    days = args.get("days") or None
    if _day_count(args, "days") is not None:
        today = datetime.now(timezone.utc).date()
        since = max(since or "", (today - timedelta(days=int(days) - 1)).isoformat())
    latest = _day_count(args, "latest")
    if latest is not None and days is None:
        newest = _newest_day(index)
        if newest is not None:
            # Shown as plain since/until in the form, so Apply keeps this very range.
            until = newest
            since = (datetime.fromisoformat(newest) - timedelta(days=latest - 1)).date()
            since = since.isoformat()
    category = args.get("category") or None
    if category is not None and category not in POLICY_CATEGORIES:
        raise errors.bad_parameter(
            "Bad filter", f"category must be one of {', '.join(POLICY_CATEGORIES)}."
        )
    return {"since": since, "until": until, "category": category, "days": days}


def _sources(index, query: dict) -> dict[tuple[str, str], list[str]]:
    """(session id, category) -> the ledger tables its events were read from."""
    found: dict[tuple[str, str], list[str]] = {}
    with store.reading(index.path) as conn:
        if conn is None:
            return found
        for session_id, category, table in conn.execute(
            load_sql(__package__, "security_sources"), query
        ):
            found.setdefault((session_id, category), []).append(table)
    return found


async def security_page(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    state = get_state(datasette)
    filters = await asyncio.get_running_loop().run_in_executor(
        None, lambda: _filters(request, state.index)
    )
    query = {k: filters[k] for k in ("since", "until", "category")}
    data, sources = await asyncio.get_running_loop().run_in_executor(
        None, lambda: (state.index.security(**query), _sources(state.index, query))
    )
    urls = Urls.of(datasette)
    catalog = state.catalog.snapshot().sessions
    for row in data["by_session"]:
        session = catalog.get(row["session_id"])
        name = session.display_name if session is not None else row["session_name"]
        row["session_name"] = name if name != row["session_id"] else None
        row["href"] = urls.session(row["session_id"]) + "#summaries"
        database = state.catalog.database_name(session) if session is not None else None
        row_filters = CATEGORY_FILTERS.get(row["category"])
        row["rows"] = [
            {"table": table, "href": urls.table(database, table, **row_filters)}
            for table in sources.get((row["session_id"], row["category"]), [])
            if database is not None and row_filters is not None
        ]
    totals = {c: 0 for c in POLICY_CATEGORIES}
    for row in data["by_day"]:
        totals[row["category"]] = totals.get(row["category"], 0) + (row["events"] or 0)
    context = {
        **data,
        # A list, not {category: n}: a JSON key "credential" reads as a secret to the masker.
        "totals": [{"category": c, "events": n} for c, n in totals.items()],
        "filters": filters,
        "categories": list(POLICY_CATEGORIES),
        "index": state.index.freshness(),
    }
    return await render.page(datasette, request, "security.html", context)


ROUTES = [(r"^/-/capsem/security(?P<format>\.json)?$", security_page)]
