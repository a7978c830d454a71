"""`/-/capsem/security` (+ `.json`): what policy stopped or flagged across sessions.

Read from the cross-session index (`policy_events`, filled by the refresh from every ledger,
a fork's copied rows counted once): denied domains (HTTP and DNS), blocked tools, security
detections and credential broker events, per day and category, per session and per subject.
Filters: `since` and `until` (days, YYYY-MM-DD), `days` (the last N days, today included),
`latest` (the N days ending on the newest day with an event: the home page's link, never
empty while there is data) and `category`. Domains, tools and rules are ledger values: escaped, and masked by the
credential policy like every page's data.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta, timezone

from datasette_capsem import errors, permissions
from datasette_capsem.index.extract import POLICY_CATEGORIES
from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import render

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_DAYS = 100_000


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


async def security_page(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    state = get_state(datasette)
    filters = await asyncio.get_running_loop().run_in_executor(
        None, lambda: _filters(request, state.index)
    )
    query = {k: filters[k] for k in ("since", "until", "category")}
    data = await asyncio.get_running_loop().run_in_executor(
        None, lambda: state.index.security(**query)
    )
    urls = Urls.of(datasette)
    catalog = state.catalog.snapshot().sessions
    for row in data["by_session"]:
        session = catalog.get(row["session_id"])
        name = session.display_name if session is not None else row["session_name"]
        row["session_name"] = name if name != row["session_id"] else None
        row["href"] = urls.session(row["session_id"]) + "#summaries"
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
