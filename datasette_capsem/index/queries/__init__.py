"""Canned queries of the Datasette database `index`: `sql/<name>.sql` plus `sql/<name>.json`.

The JSON documents use the query engine's format (title, description, databases, params), so
the same files can be offered through the `capsem_queries` hook; `index_queries()` gives them
as Datasette canned-query dicts. Read once per process.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from datasette_capsem.sqlfiles import load_sql


@cache
def _load() -> dict[str, dict[str, Any]]:
    folder = resources.files(__package__).joinpath("sql")
    queries: dict[str, dict[str, Any]] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            name = entry.name[: -len(".json")]
            document = json.loads(entry.read_text(encoding="utf-8"))
            queries[name] = {
                "sql": load_sql(__package__, name),
                "title": document["title"],
                "description": document["description"],
                "params": list(document.get("params") or ()),
            }
    return queries


def index_queries() -> dict[str, dict[str, Any]]:
    """Datasette canned-query dicts keyed by query name (a fresh copy per call)."""
    return {name: dict(options) for name, options in _load().items()}
