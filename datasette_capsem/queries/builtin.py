"""The built-in canned queries, registered through the same hook third-party plugins use."""

from __future__ import annotations

import functools

from datasette_capsem.hookspecs import hookimpl
from datasette_capsem.queries.spec import QuerySpec, load_specs


@functools.cache
def builtin_specs() -> tuple[QuerySpec, ...]:
    """Read once per process: the specs described by `queries/sql/*.json`."""
    return tuple(load_specs(__package__))


@hookimpl
def capsem_queries() -> list[QuerySpec]:
    return list(builtin_specs())
