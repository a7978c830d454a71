"""The composition root: the plugin's typed state of one Datasette instance, built once.

Like `Datasette` owning `self.urls`, `self.databases` and `self.executor`, each instance owns
one `CapsemState`: settings, catalog, mounter, the cross-session index and its session table,
and the integrity-report cache. Libraries receive what they need as arguments; only views and
hooks look the state up.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from datasette_capsem.catalog import Catalog
from datasette_capsem.checks.cache import STORE_DIRECTORY, TRACE_STORE_DIRECTORY, ReportCache
from datasette_capsem.config import (
    PLUGIN_NAME,
    ConfigError,
    Settings,
    home_problem,
    load_settings,
    serves_capsem,
)
from datasette_capsem.index.listing import SessionTable
from datasette_capsem.index.service import IndexService
from datasette_capsem.mount.mounter import Mounter
from datasette_capsem.session.follow import FollowCache
from datasette_capsem.versioned_store import VersionedStore

STATE_ATTRIBUTE = "_capsem_state"
ROLE_ATTRIBUTE = "_capsem_role"
# Databases Datasette attaches on its own, never the user's.
DATASETTE_DATABASES = frozenset({"_internal", "_memory"})
# Names Capsem's own databases take (catalog.main_database_name, index.INDEX_DATABASE).
CAPSEM_NAMES = ("main", "index")


@dataclass(frozen=True)
class Role:
    """What the plugin is in one Datasette instance, decided once, before it mounts anything.

    `serving`: it serves a Capsem home (config.serves_capsem). Otherwise it is a guest: every
    hook leaves Datasette as it is, and only `/-/capsem` says how to point it at a home.
    `own_databases`: the databases the user gave Datasette (`datasette serve other.db`); in a
    mixed instance they keep their names and pages, and a Capsem name one of them took is not
    mounted (`main`: Capsem's main.db; `index`: the cross-session index).
    """

    serving: bool
    own_databases: frozenset[str]
    home_found: bool = False  # a guest: whether a Capsem home is where Capsem keeps it

    @property
    def taken(self) -> frozenset[str]:
        """Capsem's database names a database of the user's own holds."""
        return frozenset(CAPSEM_NAMES) & self.own_databases


def get_role(datasette) -> Role:
    """The plugin's role in this instance. Decided on first use, which Datasette's hooks reach
    before the startup hook mounts anything: the databases attached then are the user's."""
    role = getattr(datasette, ROLE_ATTRIBUTE, None)
    if role is None:
        own = frozenset(set(datasette.databases) - DATASETTE_DATABASES)
        config = datasette.plugin_config(PLUGIN_NAME)
        serving = serves_capsem(config, bool(own))
        role = Role(serving, own, serving or _home_found(config))
        setattr(datasette, ROLE_ATTRIBUTE, role)
        if role.serving and role.taken:
            print(collision_message(role), file=sys.stderr)
    return role


def _home_found(config: dict | None) -> bool:
    try:
        return home_problem(load_settings(config)) is None
    except ConfigError:
        return False


def collision_message(role: Role) -> str:
    """What start-up says when a database of the user's takes a Capsem name: the user's wins."""
    names = ", ".join(sorted(role.taken))
    return (
        f"datasette-capsem: a database you serve is called {names}; yours keeps the name and "
        "its pages. Capsem's "
        + " and ".join(
            {"main": "main.db (the session index)", "index": "cross-session index"}[name]
            for name in sorted(role.taken)
        )
        + " is not mounted as a Datasette database; the plugin's pages under /-/capsem work as "
        "before. To browse Capsem's main.db too, rename your file, or serve the home with a "
        "label (datasette capsem serve --home LABEL=PATH) so it is mounted as LABEL--main."
    )


@dataclass
class CapsemState:
    settings: Settings
    catalog: Catalog
    mounter: Mounter
    index: IndexService
    session_table: SessionTable
    reports: ReportCache
    traces: ReportCache  # rows and graph of the traces viewed last (views/trace.py)
    pages: ReportCache  # whole-file answers of session pages (views/trace_cache.cached_data)
    follow: FollowCache  # newest rows of live ledgers, one read per file version (views/follow.py)
    trace_store: VersionedStore  # trace answers of stopped sessions on disk (views/trace_cache.py)


def build_state(datasette) -> CapsemState:
    """Everything the plugin keeps for one Datasette instance (nothing started yet)."""
    settings = load_settings(datasette.plugin_config(PLUGIN_NAME))
    catalog = Catalog(settings)
    return CapsemState(
        settings=settings,
        catalog=catalog,
        mounter=Mounter(datasette, catalog, settings, taken=get_role(datasette).own_databases),
        index=IndexService(settings, catalog),
        session_table=SessionTable(catalog.database_name),
        reports=ReportCache(store=VersionedStore.in_cache(settings.cache_dir, STORE_DIRECTORY)),
        # A trace page asks for its tree and graph right after its HTML: a few entries per
        # trace (rows, graph, and tree/graph/conversation answers per reader policy: up to 8),
        # kept while the ledger is unchanged, let each be built once (views/trace_cache.py).
        traces=ReportCache(size=24, max_age=120.0),
        # The overview's aggregates of the sessions viewed last, per page of turns.
        pages=ReportCache(size=32, max_age=120.0),
        follow=FollowCache(),
        trace_store=VersionedStore.in_cache(settings.cache_dir, TRACE_STORE_DIRECTORY),
    )


def get_state(datasette) -> CapsemState:
    """The plugin state of this Datasette instance (built by the startup hook, or on first use
    by a hook Datasette calls before startup)."""
    state = getattr(datasette, STATE_ATTRIBUTE, None)
    if state is None:
        state = build_state(datasette)
        setattr(datasette, STATE_ATTRIBUTE, state)
    return state
