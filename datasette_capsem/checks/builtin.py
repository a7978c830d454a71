"""The built-in checks, registered through the same hook third-party plugins use."""

from __future__ import annotations

import functools

from datasette_capsem.checks.filechecks import (
    file_checks,
)
from datasette_capsem.checks.model import Check
from datasette_capsem.checks.sqlcheck import load_checks
from datasette_capsem.hookspecs import hookimpl


@functools.cache
def builtin_checks() -> tuple[Check, ...]:
    """SQL checks from `checks/sql/*.json` plus the file-level checks, built once."""
    return tuple(load_checks(__package__)) + tuple(file_checks())


@hookimpl
def capsem_checks() -> list[Check]:
    return list(builtin_checks())
