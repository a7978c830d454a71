"""`/-/capsem` of an instance where the plugin is a guest (state.Role): how to serve a home.

Nothing else of the plugin runs there: no list at `/`, no database mounted, no header, nothing
written. This page says why, and what to run instead; it names no path of the machine.
"""

from __future__ import annotations

from datasette.utils.asgi import Response

from datasette_capsem import errors, permissions
from datasette_capsem.state import get_role
from datasette_capsem.views import render


async def guest(datasette, request):
    if not await permissions.can_view_instance(datasette, request.actor):
        raise errors.forbidden()
    role = get_role(datasette)
    context = {
        "own_databases": sorted(role.own_databases),
        "home_found": role.home_found,
    }
    if render.wants_json(request):
        return render.json_response({"serving": False, **context})
    html = await datasette.render_template(
        f"{render.TEMPLATE_DIR}/guest.html", context, request=request
    )
    return Response.html(html)


ROUTES = [(r"^/-/capsem(?:\.json|/)?$", guest)]
