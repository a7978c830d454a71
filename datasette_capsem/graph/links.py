"""URLs of the pages a graph node, a waterfall bar or a search hit points at.

Ids are percent-encoded into a path segment and database and table names tilde-encoded the
way Datasette expects, so an id from a ledger can never add a path segment of its own.
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


@dataclass(frozen=True)
class Links:
    """URL builder for one session; `base` is Datasette's base_url."""

    session_id: str
    database: str
    base: str = "/"

    @cached_property
    def _session_url(self) -> str:
        return f"{self.base}{PLUGIN_PREFIX}/sessions/{segment(self.session_id)}"

    def session(self) -> str:
        return self._session_url

    def trace(self, trace_id: str, suffix: str = "") -> str:
        return f"{self.session()}/traces/{segment(trace_id)}{suffix}"

    def exchange(self, trace_id: str, model_call_id: int, suffix: str = "") -> str:
        """One model exchange of a trace (the ambient trace's calls are each their own)."""
        return f"{self.trace(trace_id, suffix)}?exchange={int(model_call_id)}"

    def event(self, event_id: str) -> str:
        return f"{self.session()}/events/{segment(event_id)}"

    def body(self, event_id: str, blob_id: int, suffix: str = "") -> str:
        return f"{self.event(event_id)}/bodies/{int(blob_id)}{suffix}"

    def database_url(self) -> str:
        return f"{self.base}{_tilde(self.database)}"

    def table(self, table: str, **filters: Any) -> str:
        url = f"{self.database_url()}/{_tilde(table)}"
        return f"{url}?{urlencode(filters)}" if filters else url

    def row(self, table: str, row_id: Any) -> str | None:
        """Datasette's row page; None when the id is not an integer primary key."""
        if isinstance(row_id, bool) or not isinstance(row_id, int):
            return None
        return f"{self.table(table)}/{row_id}"


def with_base(base: str) -> str:
    return base if base.endswith("/") else base + "/"
