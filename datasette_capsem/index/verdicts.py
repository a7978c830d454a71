"""Each session's verdict from the quick check profile, computed by the index refresh.

The session list shows problems at a glance without running a check per request: the refresh
runs the check engine's quick profile (the one the session overview shows) on every session
whose ledger file or main.db row changed since it was last checked, and stores the verdict and
the findings in the index database (`session_checks`, `session_findings`), where SQL can read
them too. The rules stay the engine's: this module only runs it and records what it said.

The whole report goes to the rule book's report store too (`checks/cache.py`, kept by `versioned_store.py`), keyed by the
ledger file, so the overview's first visit after a refresh shows it without running a check.

What a verdict was computed from is stored beside it: the ledger's stat fingerprint and
`row_signature` (main.db row, status, liveness). The list compares the signature with the
catalog's current row and marks a verdict stale until the next refresh re-checks it.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from datasette_capsem import readonly
from datasette_capsem.catalog import Session
from datasette_capsem.checks.cache import (
    STORE_DIRECTORY,
    report_validator,
    rule_book_version,
    save_report,
)
from datasette_capsem.checks.engine import database_name_for
from datasette_capsem.checks.model import Report, verdict_of
from datasette_capsem.checks.profiles import QUICK
from datasette_capsem.checks.runner import check_catalog_session, run_options
from datasette_capsem.config import Settings
from datasette_capsem.memory import CompactRow
from datasette_capsem.versioned_store import VersionedStore, store_key

PROFILE = QUICK
SAMPLE_LIMIT = 20  # row ids kept per stored finding
VERDICT_RANK = {"error": 3, "unreadable": 3, "warning": 2, "ok": 1}


def row_signature(session: Session) -> str:
    """A digest of what a verdict depends on besides the ledger file: the main.db row, the
    status and whether the session is live. Stable across processes (a CLI refresh writes what
    a server reads)."""
    status, live = session.status, session.live
    known = session.signature  # kept on the session (the list and the refresh both ask, for
    # every session): the digest as a number, twice, plus 1 if live (36 bytes, a string 67)
    if known is not None and known & 1 == live:
        return format(known >> 1, "016x")
    row = session.main_row
    if row is None:
        items = None
    elif isinstance(row, CompactRow) and all(type(c) is str for c in row):
        items = row.items_repr()  # the same list as below, without a dict per row
    else:
        items = sorted((str(k), repr(v)) for k, v in dict(row).items())
    text = repr((items, status, live))
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    session.signature = int(digest, 16) << 1 | bool(live)
    return digest


@dataclass
class Checked:
    """One session's stored verdict: the report's counts and its findings with problems."""

    verdict: str
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    problem: str | None = None
    era: str | None = None
    check_ms: float = 0.0
    findings: list[tuple] = field(default_factory=list)  # rows of session_findings

    @classmethod
    def of_report(cls, report: Report, check_ms: float) -> Checked:
        problems = report.problems  # once: its counts and verdict are of it too
        counts = report.severity_counts(problems)
        rows = [
            (
                f.kind,
                f.severity,
                f.title,
                f.check,
                f.table,
                f.count,
                _json_ids(f.row_ids[:SAMPLE_LIMIT]),
                f.failed,
            )
            for f in problems
        ]
        return cls(
            verdict=verdict_of(problems),
            errors=counts.get("error", 0),
            warnings=counts.get("warning", 0),
            infos=counts.get("info", 0),
            era=report.era,
            check_ms=check_ms,
            findings=rows,
        )


def _json_ids(ids: list[Any]) -> str:
    return json.dumps([i if isinstance(i, (int, float, str)) else str(i) for i in ids])


FILE_PART = "file"  # the stored report's findings that judge the file alone


def file_validator(session: Session, validator: tuple) -> tuple:
    """What the findings of the checks that judge the file alone depend on
    (`profiles.judges_file_alone`): the ledger's files, the database name of their links and
    the session's id (from `report_validator`'s), not the main.db row nor liveness."""
    files, _live, _row, database = validator
    return (files, database, session.id)


def check(session: Session, settings: Settings) -> Checked:
    """The quick profile's verdict of one session (the overview's), or 'unreadable'. The report
    is the overview's very one (same profile, sample and links), and is stored for it.

    A session whose stored report is of the same ledger file version (its row changed, or
    its liveness: the verdict pass) has only the checks that read the row run again; the
    file's own findings and row counts are the stored report's (`check_session(reuse=...)`),
    which it stored with the validator of that part (`file_validator`)."""
    started, computed_at = time.perf_counter(), time.time()
    path = session.ledger_path  # a Path made on each access: taken once
    key = store_key(session, path, PROFILE)
    store, reuse, parts, version, validator = None, None, None, None, None
    options = run_options()
    if key is not None:  # a stored report (not a live session's, nor one without a ledger)
        validator = report_validator(session, path, database_name_for(session))
        store = VersionedStore.in_cache(settings.cache_dir, STORE_DIRECTORY)
        parts = {FILE_PART: file_validator(session, validator)}
        # The rule book of this run (`run_options`), not taken again per session.
        version = rule_book_version(options["checks"])
        prior = store.load(key, parts[FILE_PART], version, part=FILE_PART)
        reuse = prior.report if prior is not None else None
    try:
        report = check_catalog_session(session, settings, profile=PROFILE, reuse=reuse, **options)
    except readonly.LedgerUnavailable as problem:
        return Checked(
            "unreadable",
            problem=f"{problem.kind}: {problem.detail}",
            check_ms=(time.perf_counter() - started) * 1000,
        )
    checked = Checked.of_report(report, (time.perf_counter() - started) * 1000)
    if store is not None and key is not None:
        save_report(store, key, validator, computed_at, report, parts, version)
    return checked


def list_verdict(stored: dict[str, Any] | None, session: Session) -> dict[str, Any]:
    """The verdict a session list row shows: the stored one, 'pending' if none yet, marked
    stale when the session's main.db row, status or liveness changed since it was computed."""
    if stored is None:
        return {
            "state": "pending",
            "errors": None,
            "warnings": None,
            "infos": None,
            "kinds": [],
            "stale": None,
            "checked_at": None,
            "rank": None,
        }
    stale = None
    if stored["row_sig"] != row_signature(session):
        stale = "the session's main.db row or status changed since it was checked"
    kinds = (stored.get("kinds") or "").split()
    return {
        "state": stored["verdict"],
        "errors": stored["errors"],
        "warnings": stored["warnings"],
        "infos": stored["infos"],
        "kinds": kinds,
        "problem": stored.get("problem"),
        "stale": stale,
        "checked_at": stored["checked_at"],
        # Sorting by verdict: most severe first, then the most error and warning findings.
        "rank": (VERDICT_RANK.get(stored["verdict"], 0), stored["errors"], stored["warnings"]),
    }
