"""`/-/capsem/costs` (+ `.json`): tokens and cost by provider and model across every indexed
session, with the grand total.

The figures are the index database's canned query `tokens_cost_by_provider` (one row per
provider and model, then a total row), read from the cross-session index: a ledger file counts
once and a fork's rows copied from its parent count for the parent. The home page shows the
total and the most expensive models (`home_summary`) and links here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from datasette_capsem import errors, permissions
from datasette_capsem.index import store
from datasette_capsem.index.queries import index_queries
from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import render

QUERY = "tokens_cost_by_provider"
HOME_MODELS = 4  # models named on the home page's box; the page lists all


def cost_rows(index_path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(one row per provider and model, most expensive first; the total row or None)."""
    with store.reading(index_path) as conn:
        if conn is None:
            return [], None
        rows = [dict(row) for row in conn.execute(index_queries()[QUERY]["sql"])]
    models = [r for r in rows if r["row_kind"] == "model"]
    total = next((r for r in rows if r["row_kind"] == "total"), None)
    return models, total


def home_summary(index_path) -> dict[str, Any]:
    """The home page's box: the total and the most expensive models."""
    models, total = cost_rows(index_path)
    return {
        "total": total,
        "models": models[:HOME_MODELS],
        "more": max(len(models) - HOME_MODELS, 0),
    }


async def costs_page(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    state = get_state(datasette)
    models, total = await asyncio.get_running_loop().run_in_executor(
        None, lambda: cost_rows(state.index.path)
    )
    urls = Urls.of(datasette)
    data = {
        "models": models,
        "total": total,
        "index": state.index.freshness(),
        "links": {
            "query": urls.database("index") + "/" + QUERY,
            "json": urls.plugin("/costs.json"),
            "by_day": urls.database("index") + "/tokens_cost_by_day",
            "sessions_by_cost": urls.database("index") + "/sessions_by_cost",
        },
    }
    return await render.page(datasette, request, "costs.html", data)


ROUTES = [(r"^/-/capsem/costs(?P<format>\.json)?$", costs_page)]
