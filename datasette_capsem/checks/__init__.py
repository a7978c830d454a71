"""Integrity checks over Capsem ledgers, extensible through pluggy (see docs/extending.md).

Public API: `check_session`, `Report`, `Finding`, `Check`, `SqlCheck`, `SqlVariant`,
`CheckContext`, `hookimpl` (for plugins), `all_checks`.
"""

from __future__ import annotations

from datasette_capsem.checks.engine import all_checks, check_session
from datasette_capsem.checks.model import Check, CheckContext, Finding, Report
from datasette_capsem.checks.sqlcheck import SqlCheck, SqlVariant
from datasette_capsem.hookspecs import hookimpl

__all__ = [
    "Check",
    "CheckContext",
    "Finding",
    "Report",
    "SqlCheck",
    "SqlVariant",
    "all_checks",
    "check_session",
    "hookimpl",
]
