"""The two check profiles.

`full` (the /check page, the CLI, the rule book of the trace page) runs every check as it is.
`quick` (the session overview, shown on every view) swaps the two checks whose cost grows with
the whole file for cheap stand-ins: `schema_not_ready` runs PRAGMA quick_check instead of
integrity_check, and `blob_hash_mismatch` (blake3 over every stored body) is not run.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from datasette_capsem.checks.filechecks import (
    REQUIRED_COLUMNS,
    SQL_PACKAGE,
    SchemaReadyCheck,
    _session_page,
)
from datasette_capsem.checks.model import Check, CheckContext, Finding
from datasette_capsem.sqlfiles import load_sql

FULL, QUICK = "full", "quick"
PROFILES = (FULL, QUICK)
# Checks the quick profile does not run, and why (shown as their note).
QUICK_SKIPS = {
    "blob_hash_mismatch": "not run by the quick profile (it hashes every stored body); "
    "the full check does",
}


@dataclass
class QuickSchemaReadyCheck(SchemaReadyCheck):
    """`schema_not_ready` with PRAGMA quick_check: the same id and kind, a cheaper pragma."""

    explanation: str = (
        SchemaReadyCheck.explanation
        + " The session overview runs SQLite's quick_check (linear time; index contents are not "
        "cross-checked against their tables); the full check runs integrity_check."
    )

    def run(self, ctx: CheckContext) -> list[Finding]:
        if ctx.conn is None:
            return [self.not_applicable(ctx, "no ledger on disk")]
        problems = [f"missing {name}" for name in ctx.schema.missing(REQUIRED_COLUMNS)]
        try:
            rows = ctx.conn.execute(load_sql(SQL_PACKAGE, "quick_check")).fetchall()
            problems += [str(row[0]) for row in rows if row[0] != "ok"]
        except sqlite3.DatabaseError as error:
            problems.append(f"quick_check failed: {error}")
        if not problems:
            return [self.finding(ctx, note="quick_check")]
        details = {"file": "; ".join(problems[: ctx.sample_limit])}
        page = _session_page(ctx)  # the full check says more (integrity_check)
        link = f"{page}/check" if page else None
        return [
            self.finding(ctx, count=len(problems), details=details, link=link, note="quick_check")
        ]


@dataclass
class SkippedCheck(Check):
    """A check a profile does not run: reported as not applicable, with the reason."""

    check: Check
    reason: str

    def __post_init__(self) -> None:
        self.id, self.kind = self.check.id, self.check.kind
        self.severity = getattr(self.check, "severity", None)
        self.title = getattr(self.check, "title", None)
        self.explanation = getattr(self.check, "explanation", "")

    def run(self, ctx: CheckContext) -> list[Finding]:
        return [self.not_applicable(ctx, self.reason)]


def for_profile(checks: list[Check], profile: str) -> list[Check]:
    """`checks` as `profile` runs them (see the module docstring)."""
    if profile == FULL:
        return list(checks)
    if profile != QUICK:
        raise ValueError(f"unknown check profile {profile!r}; one of {', '.join(PROFILES)}")
    chosen: list[Check] = []
    for check in checks:
        if check.id in QUICK_SKIPS:
            chosen.append(SkippedCheck(check, QUICK_SKIPS[check.id]))
        elif type(check) is SchemaReadyCheck:
            chosen.append(QuickSchemaReadyCheck())
        else:
            chosen.append(check)
    return chosen
