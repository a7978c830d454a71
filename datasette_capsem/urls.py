"""The one URL builder of the plugin's pages, aware of Datasette's `base_url`.

`Urls` (one per Datasette instance, like Datasette's own `datasette.urls`) builds every
instance-level page: a session, its check, resolve, search, findings, Datasette's table and
row pages. `SessionUrls` (from `Urls.for_session`) builds the pages under one session:
traces, exchanges, events, bodies. Ids are percent-encoded into a path segment and database
and table names tilde-encoded the way Datasette expects, so an id from a ledger can never add
a path segment of its own. Checks, the index, the trace model and the views all build links
here; nothing else formats a plugin URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any
from urllib.parse import quote, urlencode

from datasette.utils import tilde_encode

PLUGIN_PREFIX = "-/capsem"


@lru_cache(maxsize=256)
def _tilde(name: str) -> str:
    return tilde_encode(name)


@lru_cache(maxsize=4096)
def _segment(value: str) -> str:
    return quote(value, safe="").replace(".", "%2E")


def segment(value: Any) -> str:
    """One path segment, every reserved character escaped (including '/' and '.')."""
    return _segment(str(value))


def with_base(base: str | None) -> str:
    """Datasette's base_url as a prefix: always ending in '/'."""
    base = base or "/"
    return base if base.endswith("/") else base + "/"


@dataclass(frozen=True)
class Urls:
    """Instance-level URLs; `base` is Datasette's base_url ('/' for a CLI's or a check's)."""

    base: str = "/"

    @classmethod
    def of(cls, datasette) -> Urls:
        return cls(with_base(datasette.setting("base_url")))

    def plugin(self, path: str = "") -> str:
        return f"{self.base}{PLUGIN_PREFIX}{path}"

    def session(self, session_id: Any, to: str | None = None) -> str:
        """A session's page (or a path under it): always keyed by id, never by name."""
        url = self.plugin(f"/sessions/{segment(session_id)}")
        return f"{url}/{to.lstrip('/')}" if to else url

    def check(self, session_id: Any, suffix: str = "") -> str:
        return f"{self.session(session_id)}/check{suffix}"

    def sessions(self, **filters: Any) -> str:
        """The session list, filtered (e.g. `home=LABEL`: one labelled home's sessions)."""
        url = self.plugin("")
        return f"{url}?{urlencode(filters)}" if filters else url

    def resolve(self, name: str) -> str:
        return f"{self.plugin('/resolve')}?{urlencode({'name': name})}"

    def search(self, query: str) -> str:
        return f"{self.plugin('/search')}?{urlencode({'q': query})}"

    def compare(self, a: str, b: str, suffix: str = "") -> str:
        """Two turns side by side; `a` and `b` are `SESSION_ID:TRACE_ID`."""
        return f"{self.plugin('/compare')}{suffix}?{urlencode({'a': a, 'b': b})}"

    def database(self, database: str) -> str:
        return f"{self.base}{_tilde(database)}"

    def table(self, database: str, table: str, **filters: Any) -> str:
        url = f"{self.database(database)}/{_tilde(table)}"
        return f"{url}?{urlencode(filters)}" if filters else url

    def row(self, database: str, table: str, pk: Any) -> str:
        """Datasette's row page for a primary key (tilde-encoded, as Datasette expects)."""
        return f"{self.table(database, table)}/{_tilde(str(pk))}"

    def query(self, database: str, name: str, **params: Any) -> str:
        url = f"{self.database(database)}/{quote(name)}"
        return f"{url}?{urlencode(params)}" if params else url

    def for_session(self, session_id: str, database: str) -> SessionUrls:
        return _session_urls(session_id, database, self.base)


@lru_cache(maxsize=256)
def _session_urls(session_id: str, database: str, base: str) -> SessionUrls:
    """One builder per session database (its URLs depend on nothing else, and it caches its
    session URL): `render_cell` asks for one for every linked cell of a page."""
    return SessionUrls(session_id, database, base)


@dataclass(frozen=True)
class SessionUrls:
    """URLs of the pages under one session; `base` is Datasette's base_url."""

    session_id: str
    database: str
    base: str = "/"

    @cached_property
    def _session_url(self) -> str:
        return Urls(self.base).session(self.session_id)

    def session(self) -> str:
        return self._session_url

    def trace(self, trace_id: str, suffix: str = "") -> str:
        return f"{self.session()}/traces/{segment(trace_id)}{suffix}"

    def exchange(self, trace_id: str, model_call_id: int, suffix: str = "") -> str:
        """One model exchange of a trace (the ambient trace's calls are each their own)."""
        return f"{self.trace(trace_id, suffix)}?exchange={int(model_call_id)}"

    def event(self, event_id: str) -> str:
        return f"{self.session()}/events/{segment(event_id)}"

    def ledger_row(self, table: str, row_id: int) -> str:
        """One ledger row by table and id: its event page when it has an event id, else
        Datasette's row page (the plugin route redirects)."""
        return f"{self.session()}/rows/{segment(table)}/{int(row_id)}"

    def tool_call(
        self, call_id: str, trace_id: str | None = None, model_call_id: int | None = None
    ) -> str:
        """The tool call a call id names (the plugin route redirects to its event page);
        `trace_id` and `model_call_id` say which one when the id recurs (a response's call)."""
        url = f"{self.session()}/tool-calls/{segment(call_id)}"
        params = {k: v for k, v in (("trace", trace_id), ("model_call", model_call_id)) if v}
        return f"{url}?{urlencode(params)}" if params else url

    def body(self, event_id: str, blob_id: int, suffix: str = "") -> str:
        return f"{self.event(event_id)}/bodies/{int(blob_id)}{suffix}"

    def check(self, suffix: str = "") -> str:
        return f"{self.session()}/check{suffix}"

    def database_url(self) -> str:
        return Urls(self.base).database(self.database)

    def table(self, table: str, **filters: Any) -> str:
        return Urls(self.base).table(self.database, table, **filters)

    def row(self, table: str, row_id: Any) -> str | None:
        """Datasette's row page; None when the id is not an integer primary key."""
        if isinstance(row_id, bool) or not isinstance(row_id, int):
            return None
        return f"{self.table(table)}/{row_id}"
