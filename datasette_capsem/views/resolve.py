"""`/-/capsem/resolve?name=NAME[&to=PATH]` and its `.json`: a display name to its session's page.

The rule (ids first, then names; several candidates give a chooser) is the catalog's:
`catalog/resolve.py`.
"""

from __future__ import annotations

import re

from datasette.utils.asgi import Response

from datasette_capsem import errors, permissions, redaction
from datasette_capsem.catalog.resolve import candidate, resolve_name
from datasette_capsem.state import get_state
from datasette_capsem.urls import Urls
from datasette_capsem.views import render
from datasette_capsem.views.opening import may_view, viewable_resolution

MAX_NAME_LENGTH = 256
# `to` is a path under the session's page: plain segments only, no scheme, host or '..'.
SAFE_TO = re.compile(r"^[A-Za-z0-9_.~-]+(/[A-Za-z0-9_.~-]+)*/?$")


async def resolve(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    name = (request.args.get("name") or "").strip()
    to = (request.args.get("to") or "").strip() or None
    if not name:
        raise errors.bad_parameter("Bad parameter", "name is required: /-/capsem/resolve?name=NAME")
    if len(name) > MAX_NAME_LENGTH or "\x00" in name:
        raise errors.bad_parameter(
            "Bad parameter", f"name must be under {MAX_NAME_LENGTH} characters"
        )
    if to is not None and (not SAFE_TO.match(to) or ".." in to.split("/")):
        raise errors.bad_parameter("Bad parameter", "to must be a relative path like 'traces/abc'")
    catalog = get_state(datasette).catalog
    resolution = await viewable_resolution(datasette, request, resolve_name(catalog, name))
    if not resolution.candidates:
        near = [
            candidate(s, "near")
            for s in catalog.near_matches(name, shown=redaction.name_view())
            if await may_view(datasette, request, s)
        ]
        raise errors.not_found("Unknown session", f"No session has the id or name {name!r}.", near)
    if render.wants_json(request):
        return render.json_response(
            resolution.as_json(), status=300 if resolution.ambiguous else 200
        )
    if resolution.ambiguous:
        context = {**resolution.as_json(), "to": to}
        return await render.page(datasette, request, "resolve.html", context, status=300)
    return Response.redirect(Urls.of(datasette).session(resolution.id, to))


ROUTES = [
    (r"^/-/capsem/resolve(\.json)?$", resolve),
]
