"""The per-Datasette state of the plugin: settings, catalog and mounts, created once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from datasette_capsem.catalog import Catalog
from datasette_capsem.config import PLUGIN_NAME, Settings, load_settings
from datasette_capsem.mount.mounter import Mounter

STATE_ATTRIBUTE = "_capsem_state"


@dataclass
class CapsemState:
    settings: Settings
    catalog: Catalog
    mounter: Mounter
    # Services other modules attach at startup (e.g. the cross-session index), by name.
    services: dict[str, Any] = field(default_factory=dict)


def get_state(datasette) -> CapsemState:
    """The plugin state of this Datasette instance, built on first use."""
    state = getattr(datasette, STATE_ATTRIBUTE, None)
    if state is None:
        settings = load_settings(datasette.plugin_config(PLUGIN_NAME))
        catalog = Catalog(settings)
        state = CapsemState(settings, catalog, Mounter(datasette, catalog, settings))
        setattr(datasette, STATE_ATTRIBUTE, state)
    return state
