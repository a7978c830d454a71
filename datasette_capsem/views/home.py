"""The Capsem-aware home page: recent sessions, newest first, paginated."""

from __future__ import annotations

from datasette_capsem.state import get_state
from datasette_capsem.views import render

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


def page_bounds(request, total: int) -> tuple[int, int] | str:
    """(offset, size) from Datasette-style `_size` and `_next`, or an error message."""
    raw_size = request.args.get("_size") or str(DEFAULT_PAGE_SIZE)
    size = MAX_PAGE_SIZE if raw_size == "max" else raw_size
    try:
        size = int(size)
        offset = int(request.args.get("_next") or 0)
    except ValueError:
        return "_size must be a positive integer or 'max', _next a non-negative integer"
    if size < 1 or offset < 0:
        return "_size must be a positive integer or 'max', _next a non-negative integer"
    return offset, min(size, MAX_PAGE_SIZE)


async def home(datasette, request):
    state = get_state(datasette)
    sessions = state.catalog.sessions()
    bounds = page_bounds(request, len(sessions))
    if isinstance(bounds, str):
        return await render.error(datasette, request, 400, "Bad pagination", bounds)
    offset, size = bounds
    shown = sessions[offset : offset + size]
    next_offset = offset + size if offset + size < len(sessions) else None
    snapshot = state.catalog.snapshot()
    context = {
        "sessions": [s.summary() for s in shown],
        "total": len(sessions),
        "offset": offset,
        "next": next_offset,
        "size": size,
        "problems": snapshot.problems,
        "capsem_home": str(state.settings.capsem_home),
        "home_exists": snapshot.home_exists,
        "demo": state.settings.demo,
    }
    return await render.page(datasette, request, "home.html", context)


ROUTES = [
    (r"^/$", home),
    (r"^/-/capsem/?$", home),
    (r"^/-/capsem/sessions\.json$", home),
]
