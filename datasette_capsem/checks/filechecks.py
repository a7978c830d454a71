"""Checks about a whole file, its place on disk, or its main.db row (spec §6.2 #17-19, 21-22).

These need more than SQL over the ledger: the catalog Session (paths, WAL), the main.db row,
or SQLite's integrity check. They are Check subclasses like any plugin's would be.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from datasette_capsem.checks.model import Check, CheckContext, Finding
from datasette_capsem.ledger import rollup
from datasette_capsem.ledger.tables import TABLES
from datasette_capsem.sqlfiles import load_sql

SQL_PACKAGE = "datasette_capsem.checks"

# check_session.py's five tables, with the columns every era has (spec §4.5, §5.1).
REQUIRED_COLUMNS = {t.name: t.required_columns for t in TABLES if t.required_columns}
# Ledger table -> the main.db rollup columns its `rollup__<table>.sql` computes (spec §3.5).
ROLLUP_SOURCES = {t.name: t.rollup for t in TABLES if t.rollup}
# Statuses whose session has stopped (its WAL should have been checkpointed).
STOPPED_STATUSES = ("stopped", "crashed")
STALE_AFTER_SECONDS = 24 * 3600


def _session_id(ctx: CheckContext) -> str | None:
    if ctx.session is not None:
        return ctx.session.id
    return str(ctx.main_row["id"]) if ctx.main_row and "id" in ctx.main_row else None


def _main_row_link(ctx: CheckContext) -> str | None:
    session_id = _session_id(ctx)
    return ctx.urls.row("main", "sessions", session_id) if session_id else None


def _session_page(ctx: CheckContext) -> str | None:
    session_id = _session_id(ctx)
    return ctx.urls.session(session_id) if session_id else None


def _ledger_path(ctx: CheckContext) -> Path | None:
    path = getattr(ctx.session, "ledger_path", None)
    return Path(path) if path else None


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


@dataclass
class SchemaReadyCheck(Check):
    """This project's era-tolerant readiness rule: integrity_check is ok and the five tables
    every era has exist with the columns every era gives them (`CapsemReadyCheck` says what
    Capsem's own, current-era rule would say)."""

    id: str = "schema_not_ready"
    kind: str = "schema_not_ready"
    explanation: str = (
        "This project's era-tolerant readiness rule: SQLite's integrity_check passes and the "
        "tables every era of Capsem has (net_events, model_calls, tool_calls, tool_responses, "
        "fs_events) exist with the columns every era gives them. A file failing this is damaged "
        "or was never fully created. (capsem_ready_schema says what Capsem's own, stricter "
        "current-era rule would say.)"
    )
    pragma: str = "integrity_check"  # the quick profile runs quick_check (checks/profiles.py)
    note: str | None = None
    link_suffix: str = ""  # where the page of a problem says more
    reads_whole_file = True  # not a field: every page of the file, whichever pragma

    def run(self, ctx: CheckContext) -> list[Finding]:
        if ctx.conn is None:
            return [self.not_applicable(ctx, "no ledger on disk")]
        problems = [f"missing {name}" for name in ctx.schema.missing(REQUIRED_COLUMNS)]
        try:
            rows = ctx.conn.execute(load_sql(SQL_PACKAGE, self.pragma)).fetchall()
            problems += [str(row[0]) for row in rows if row[0] != "ok"]
        except sqlite3.DatabaseError as error:
            problems.append(f"{self.pragma} failed: {error}")
        if not problems:
            return [self.finding(ctx, note=self.note)]
        details = {"file": "; ".join(problems[: ctx.sample_limit])}
        page = _session_page(ctx)
        link = page + self.link_suffix if page else None
        values = {"count": len(problems), "details": details, "link": link, "note": self.note}
        return [self.finding(ctx, **values)]


@functools.cache
def capsem_ready_columns() -> dict[str, tuple[str, ...]]:
    """What Capsem's validate_ready_schema requires (checks/capsem_ready_schema.json)."""
    document = json.loads(
        resources.files(SQL_PACKAGE).joinpath("capsem_ready_schema.json").read_text("utf-8")
    )
    return {table: tuple(columns) for table, columns in document["tables"].items()}


@dataclass
class CapsemReadyCheck(Check):
    """What Capsem's own ledger routes would say about the file (`validate_ready_schema`)."""

    id: str = "capsem_ready_schema"
    kind: str = "capsem_ready_schema"
    explanation: str = (
        "Capsem's own ledger routes (validate_ready_schema at HEAD) refuse a file unless its 15 "
        "current tables exist with their required columns. A file of an older era, never "
        "reopened by a newer writer, lacks some of them by design: this says what Capsem's app "
        "would do with it, not that it is damaged (schema_not_ready, this project's own "
        "era-tolerant rule, says that)."
    )

    def run(self, ctx: CheckContext) -> list[Finding]:
        if ctx.conn is None:
            return [self.not_applicable(ctx, "no ledger on disk")]
        missing = ctx.schema.missing(capsem_ready_columns())
        if not missing:
            return [self.finding(ctx)]
        shown = ", ".join(missing[:12]) + (
            f" and {len(missing) - 12} more" if len(missing) > 12 else ""
        )
        details = {"file": f"Capsem's ledger routes would refuse this file: it lacks {shown}"}
        return [self.finding(ctx, count=1, table="file", details=details)]


@dataclass
class LegacyTablesCheck(Check):
    """Tables a current writer never creates (spec §6.2 #21)."""

    id: str = "legacy_tables"
    kind: str = "legacy_tables"
    explanation: str = (
        "Tables from older Capsem versions (mcp_calls, snapshot_events, session_identity, the "
        "1.2 ai_* and journal tables). Capsem never drops most of them, so a persistent VM's "
        "migrated file keeps them; their rows are not part of the current ledger."
    )

    def run(self, ctx: CheckContext) -> list[Finding]:
        if ctx.conn is None:
            return [self.not_applicable(ctx, "no ledger on disk")]
        found = ctx.schema.legacy_tables
        if not found:
            return [self.finding(ctx)]
        return [
            self.finding(ctx, table=table, count=1, link=ctx.table_link(table, []))
            for table in found
        ]


@dataclass
class RollupCheck(Check):
    """main.db's counters against fresh aggregates of the ledger (spec §6.2 #17).

    The comparison itself is `ledger/rollup.py::compare_rollup`, shared with the session list.
    """

    id: str = "rollup_mismatch"
    kind: str = "rollup_mismatch"
    explanation: str = (
        "When a session stops Capsem copies counts and sums from its ledger into its main.db row "
        "(requests, allowed, denied, tokens, cost, tool calls, file events, execs, audit events). "
        "Here the row disagrees with the ledger, so main.db dashboards are wrong for this session. "
        "A persistent VM resumed since its last stop is expected to be ahead of its row. Columns "
        "a row's writer never filled are not compared: total_mcp_calls (not written since "
        "2026-06-24), and tokens, cost, tool calls, exec and audit counts of capsem run rows "
        "stopped before 2026-06-27."
    )

    def run(self, ctx: CheckContext) -> list[Finding]:
        fresh = None if ctx.conn is None else self._fresh(ctx)
        kind = getattr(ctx.session, "kind", None)
        comparison = rollup.compare_rollup(ctx.main_row, fresh, kind=kind)
        if not comparison.applicable:
            return [self.not_applicable(ctx, comparison.reason or "", table="sessions")]
        if comparison.verdict == rollup.OK:
            return [self.finding(ctx, table="sessions")]
        values: dict[str, Any] = {
            "table": "sessions",
            "count": 1,
            "details": {str(_session_id(ctx)): comparison.describe()},
            "link": _main_row_link(ctx),
        }
        if comparison.verdict == rollup.AHEAD:
            values.update(
                severity="warning",
                note="the ledger is ahead of main.db: a resumed "
                "persistent VM keeps its old row until it stops again",
            )
        return [self.finding(ctx, **values)]

    @staticmethod
    def _fresh(ctx: CheckContext) -> dict[str, Any]:
        """The rollup figures Capsem would compute from this ledger now; None where the
        ledger has no table to compute one from."""
        fresh: dict[str, Any] = dict.fromkeys(rollup.ROLLUP_COLUMNS)
        wanted = set(ctx.main_row or ())
        for table, columns in ROLLUP_SOURCES.items():
            if table not in ctx.schema.tables or not wanted.intersection(columns):
                continue
            cursor = ctx.conn.execute(load_sql(SQL_PACKAGE, f"rollup__{table}"))
            fresh.update(zip([d[0] for d in cursor.description], cursor.fetchone(), strict=True))
        return fresh


@dataclass
class StaleRunningCheck(Check):
    """A `running` row nothing will ever flip to crashed (spec §6.2 #18)."""

    id: str = "stale_running"
    kind: str = "stale_running"
    explanation: str = (
        "main.db says this session is running, but its directory is gone, or its ledger has no "
        "write-ahead log (a running writer always has one), or the log has not changed for a day. "
        "Nothing in Capsem ever marks such rows crashed, so they stay 'running' forever."
    )
    stale_after_seconds: float = STALE_AFTER_SECONDS

    def run(self, ctx: CheckContext) -> list[Finding]:
        if not ctx.main_row:
            return [self.not_applicable(ctx, "the session has no main.db row", table="sessions")]
        if ctx.main_row.get("status") != "running":
            return [self.finding(ctx, table="sessions")]
        reason = self._stale_reason(ctx)
        if reason is None:
            return [self.finding(ctx, table="sessions")]
        session_id = _session_id(ctx)
        return [
            self.finding(
                ctx,
                table="sessions",
                count=1,
                details={str(session_id): reason},
                link=_main_row_link(ctx),
            )
        ]

    def _stale_reason(self, ctx: CheckContext) -> str | None:
        ledger = _ledger_path(ctx)
        if ledger is None or _stat(ledger) is None:
            return "no session directory or ledger on disk"
        if ledger.suffix == ".gz":
            return "the ledger is a compressed 0.x archive"
        wal = _stat(Path(f"{ledger}-wal"))
        if wal is None:
            return "the ledger has no write-ahead log, so no writer has it open"
        idle = ctx.now - wal.st_mtime
        if idle > self.stale_after_seconds:
            return f"the write-ahead log has not changed for {idle / 3600:.0f} hours"
        return None


@dataclass
class UncleanWalCheck(Check):
    """A non-empty WAL beside a session main.db says has stopped (spec §6.2 #19)."""

    id: str = "unclean_wal"
    kind: str = "unclean_wal"
    explanation: str = (
        "Capsem checkpoints and empties the write-ahead log when a session stops cleanly. A "
        "non-empty session.db-wal beside a stopped or crashed session means the writer was killed "
        "or crashed: rows still in its memory mirror were lost."
    )

    def run(self, ctx: CheckContext) -> list[Finding]:
        ledger = _ledger_path(ctx)
        if not ctx.main_row:
            return [self.not_applicable(ctx, "the session has no main.db row")]
        if ledger is None or ledger.suffix == ".gz":
            return [self.not_applicable(ctx, "no uncompressed ledger on disk")]
        if ctx.main_row.get("status") not in STOPPED_STATUSES:
            return [self.not_applicable(ctx, "the session is not stopped")]
        wal = _stat(Path(f"{ledger}-wal"))
        if wal is None or wal.st_size == 0:
            return [self.finding(ctx)]
        name = f"{ledger.name}-wal"
        return [
            self.finding(
                ctx,
                count=1,
                link=_session_page(ctx),
                details={name: f"{wal.st_size} bytes"},
            )
        ]


def file_checks() -> list[Check]:
    return [
        SchemaReadyCheck(),
        CapsemReadyCheck(),
        LegacyTablesCheck(),
        RollupCheck(),
        StaleRunningCheck(),
        UncleanWalCheck(),
    ]
