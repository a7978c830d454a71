"""The two check profiles.

`full` (the /check page, the CLI, the rule book of the trace page) runs every check as it is.
`quick` (the session overview, shown on every view) swaps the two checks whose cost grows with
the whole file for cheap stand-ins: `schema_not_ready` runs PRAGMA quick_check instead of
integrity_check, and `blob_hash_mismatch` (blake3 over every stored body) is not run.
`rows` (the per-row verdicts every trace, event and OTLP page draws) runs every row-level check
as `full` does, and leaves out `schema_not_ready`, whose integrity_check (or quick_check) reads
every page of the file and judges no row: the whole-file B-tree check is the /check page's job,
not a trace view's (on a 300,000-row ledger quick_check alone was a second of a cold trace
page).
"""

from __future__ import annotations

from dataclasses import dataclass

from datasette_capsem.checks.filechecks import (
    CapsemReadyCheck,
    LegacyTablesCheck,
    SchemaReadyCheck,
)
from datasette_capsem.checks.model import Check, CheckContext, Finding
from datasette_capsem.checks.sqlcheck import SqlCheck

FULL, QUICK, ROWS = "full", "quick", "rows"
PROFILES = (FULL, QUICK, ROWS)
# Checks the quick profile does not run, and why (shown as their note).
QUICK_SKIPS = {
    "blob_hash_mismatch": "not run by the quick profile (it hashes every stored body); "
    "the full check does",
}
ROWS_SKIP = "judges the file, not a row: not run for the pages' row verdicts; the full check does"


def quick_schema_ready_check() -> SchemaReadyCheck:
    """`schema_not_ready` with PRAGMA quick_check: the same id and kind, a cheaper pragma; its
    link goes to the full check, which says more (integrity_check)."""
    return SchemaReadyCheck(
        explanation=SchemaReadyCheck.explanation
        + " The session overview runs SQLite's quick_check (linear time; index contents are not "
        "cross-checked against their tables); the full check runs integrity_check.",
        pragma="quick_check",
        note="quick_check",
        link_suffix="/check",
    )


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
    if profile not in PROFILES:
        raise ValueError(f"unknown check profile {profile!r}; one of {', '.join(PROFILES)}")
    chosen: list[Check] = []
    for check in checks:
        if profile == QUICK and check.id in QUICK_SKIPS:
            chosen.append(SkippedCheck(check, QUICK_SKIPS[check.id]))
        elif type(check) is SchemaReadyCheck:
            rows = profile == ROWS
            chosen.append(SkippedCheck(check, ROWS_SKIP) if rows else quick_schema_ready_check())
        else:
            chosen.append(check)
    return chosen


# Checks of the whole file that read nothing of the session but its id and database name.
FILE_ONLY_TYPES = (SchemaReadyCheck, CapsemReadyCheck, LegacyTablesCheck)


def judges_file_alone(check: Check) -> bool:
    """Whether `check`'s findings depend on the ledger file (and the session's id and
    database name) alone, not on its main.db row, status or liveness: a SQL check that is
    neither `only_when_stopped` nor has a `live_severity`, the schema and legacy-table
    checks, and a profile's stand-in (a constant "not run"). The rollup, stale-running and
    WAL checks read the row; a plugin's check is never taken as file-only (it may read it).
    Their findings can be taken from a report of the same file version
    (`check_session(reuse=...)`) when only the row changed."""
    if isinstance(check, SkippedCheck):
        return True
    if type(check) is SqlCheck:
        return not (check.only_when_stopped or check.live_severity)
    return type(check) in FILE_ONLY_TYPES
