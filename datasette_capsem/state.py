"""The composition root: the plugin's typed state of one Datasette instance, built once.

Like `Datasette` owning `self.urls`, `self.databases` and `self.executor`, each instance owns
one `CapsemState`: settings, catalog, mounter, the cross-session index and its session table,
and the integrity-report cache. Libraries receive what they need as arguments; only views and
hooks look the state up.
"""

from __future__ import annotations

from dataclasses import dataclass

from datasette_capsem.catalog import Catalog
from datasette_capsem.checks.cache import TRACE_STORE_DIRECTORY, ReportCache, ReportStore
from datasette_capsem.config import PLUGIN_NAME, Settings, load_settings
from datasette_capsem.graph.follow import FollowCache
from datasette_capsem.index.listing import SessionTable
from datasette_capsem.index.service import IndexService
from datasette_capsem.mount.mounter import Mounter

STATE_ATTRIBUTE = "_capsem_state"


@dataclass
class CapsemState:
    settings: Settings
    catalog: Catalog
    mounter: Mounter
    index: IndexService
    session_table: SessionTable
    reports: ReportCache
    traces: ReportCache  # rows and graph of the traces viewed last (views/trace.py)
    follow: FollowCache  # newest rows of live ledgers, one read per file version (views/follow.py)
    trace_store: ReportStore  # trace answers of stopped sessions on disk (views/trace_cache.py)


def build_state(datasette) -> CapsemState:
    """Everything the plugin keeps for one Datasette instance (nothing started yet)."""
    settings = load_settings(datasette.plugin_config(PLUGIN_NAME))
    catalog = Catalog(settings)
    return CapsemState(
        settings=settings,
        catalog=catalog,
        mounter=Mounter(datasette, catalog, settings),
        index=IndexService(settings, catalog),
        session_table=SessionTable(catalog.database_name),
        reports=ReportCache(store=ReportStore.in_cache(settings.cache_dir)),
        # A trace page asks for its tree and graph right after its HTML: a few entries per
        # trace (rows, graph, and tree/graph/conversation answers per reader policy: up to 8),
        # kept while the ledger is unchanged, let each be built once (views/trace_cache.py).
        traces=ReportCache(size=24, max_age=120.0),
        follow=FollowCache(),
        trace_store=ReportStore.in_cache(settings.cache_dir, TRACE_STORE_DIRECTORY),
    )


def get_state(datasette) -> CapsemState:
    """The plugin state of this Datasette instance (built by the startup hook, or on first use
    by a hook Datasette calls before startup)."""
    state = getattr(datasette, STATE_ATTRIBUTE, None)
    if state is None:
        state = build_state(datasette)
        setattr(datasette, STATE_ATTRIBUTE, state)
    return state
