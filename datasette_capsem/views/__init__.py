"""HTTP routes and pages. Each module exposes `ROUTES`, a list of (regex, handler)."""

from __future__ import annotations

import importlib

# Order matters only where two patterns could match the same path: first wins.
ROUTE_MODULES = ("home", "resolve", "session", "trace", "event", "search", "checks")


def all_routes() -> list[tuple[str, object]]:
    routes: list[tuple[str, object]] = []
    for module_name in ROUTE_MODULES:
        routes += importlib.import_module(f"{__name__}.{module_name}").ROUTES
    return routes
