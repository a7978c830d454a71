"""The plugin manager behind checks and canned queries.

One manager per process: built-ins first, then whatever packages declare in the
``datasette_capsem`` entry-point group. Tests and embedders may ``register`` more plugin
objects at run time; results are never cached across calls, so they take effect at once.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from typing import Any

import pluggy

from datasette_capsem import hookspecs

# Modules of this package that implement the hooks; each registers like an outside plugin.
BUILTIN_PLUGINS = (
    "datasette_capsem.checks.builtin",
    "datasette_capsem.queries.builtin",
)


@functools.cache
def plugin_manager() -> pluggy.PluginManager:
    """The process-wide manager, with built-ins and entry-point plugins loaded once."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    for module_name in BUILTIN_PLUGINS:
        manager.register(importlib.import_module(module_name), name=module_name)
    manager.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
    return manager


def _flatten(results: Iterable[Iterable[Any] | None]) -> list[Any]:
    return [item for result in results if result for item in result]


def collect(hook_name: str, id_attribute: str) -> list[Any]:
    """Every object the hook returns, one per id: a later-registered plugin overrides an earlier.

    pluggy calls the most recently registered implementation first, so keeping the first
    object seen for an id lets a third-party plugin replace a built-in of the same id.
    """
    hook = getattr(plugin_manager().hook, hook_name)
    seen: dict[Any, Any] = {}
    for item in _flatten(hook()):
        seen.setdefault(getattr(item, id_attribute), item)
    return list(seen.values())
