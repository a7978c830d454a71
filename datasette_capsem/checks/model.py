"""What a check is, what it reports, and the context it runs in.

Findings use the ids of `datasette_capsem.findings`, the vocabulary the generator also writes
into its manifest, so a report and a manifest can be compared directly.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import json
import operator
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from datasette_capsem.findings import KINDS, Severity
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.urls import Urls

DEFAULT_SAMPLE_LIMIT = 50


# Cached: a `check --all` builds ~50 findings per session, and Enum's `.value` is slow.
@functools.cache
def kind_severity(kind: str, fallback: Severity | str | None = None) -> str:
    """The default severity of a finding kind; plugins' own kinds bring their own."""
    if kind in KINDS:
        return KINDS[kind].severity.value
    if fallback is None:
        raise ValueError(f"finding kind {kind!r} is not in findings.KINDS: give a severity")
    return Severity(fallback).value


@functools.cache
def kind_title(kind: str, fallback: str | None = None) -> str:
    if kind in KINDS:
        return KINDS[kind].title
    return fallback or kind.replace("_", " ").capitalize()


@dataclass
class Finding:
    """The outcome of one check on one table (or on the file): how many rows break it.

    `count` 0 with `applicable` True means the check ran and passed; `applicable` False means
    the file's era cannot answer it (`note` says why). `row_ids` is a sample of the offending
    rows, in id order; `details` holds a one-line reason per sampled row when there is one.
    """

    kind: str
    severity: str
    count: int
    title: str
    explanation: str
    link: str | None = None
    applicable: bool = True
    row_ids: list[Any] = field(default_factory=list)
    table: str | None = None
    check: str = ""
    note: str | None = None
    details: dict[str, str] = field(default_factory=dict)
    failed: str | None = None  # the check could not run (SQLite error); counts as a problem
    # Every offending row id, not only the sample: pages restrict the report to the rows they
    # show (`Report.row_verdicts`). Not part of the JSON report.
    offending: tuple[Any, ...] = ()

    @property
    def problem(self) -> bool:
        return self.applicable and (self.count > 0 or self.failed is not None)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """The finding `to_dict` gave (its offending rows are the sample it kept)."""
        return cls(
            kind=data["kind"],
            severity=data["severity"],
            count=data["count"],
            title=data["title"],
            explanation=data["explanation"],
            link=data["link"],
            applicable=data["applicable"],
            row_ids=list(data["row_ids"]),
            table=data["table"],
            check=data["check"],
            note=data["note"],
            details=dict(data["details"]),
            failed=data["failed"],
            offending=tuple(data["row_ids"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "check": self.check,
            "severity": self.severity,
            "table": self.table,
            "count": self.count,
            "applicable": self.applicable,
            "problem": self.problem,
            "title": self.title,
            "explanation": self.explanation,
            "note": self.note,
            "link": self.link,
            "row_ids": list(self.row_ids),
            "details": dict(self.details),
            "failed": self.failed,
        }


# Finding's defaults (its mutable ones, row_ids and details, are made anew by `Check.finding`).
FINDING_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(Finding) if f.default is not dataclasses.MISSING
} | {"count": 0}


@dataclass
class CheckContext:
    """Everything a check may look at. `conn` is None for a session with no ledger on disk."""

    conn: sqlite3.Connection | None
    schema: LedgerSchema
    session: Any = None  # catalog Session
    main_row: dict[str, Any] | None = None
    live: bool = False
    database: str | None = None  # Datasette database name, for links
    sample_limit: int = DEFAULT_SAMPLE_LIMIT
    now: float = field(default_factory=time.time)
    urls: Urls = field(default_factory=Urls)  # root-relative: pages prefix their base_url
    # What checks worked out from the schema alone (which SQL variant applies, its rendered
    # text), shared by the sessions of one run (`check --all`): keyed by the schema's tables
    # and columns, so files of the same shape reuse it. Otherwise shared by every call while
    # the rule book and the registered plugins are unchanged (`engine._shared_memo`), so a
    # plugin registered between calls still takes effect at once.
    memo: dict[Any, Any] = field(default_factory=dict)
    # Offending rows already read for a check on a table, by (check id, table): distinct ids
    # in order and the reasons of the sampled ones, as `SqlCheck` collects them. Filled by
    # `fused.read_shared` (one statement for a table's simple row checks) before they run.
    answered: dict[tuple[str, str | None], tuple[dict[Any, None], dict[str, str]]] = field(
        default_factory=dict
    )
    _schema_key: frozenset | None = field(default=None, init=False, repr=False)

    def schema_key(self) -> frozenset:
        """The file's shape (tables and their columns), for `memo` keys."""
        if self._schema_key is None:
            # One object per shape in the memo: a memo key then compares by identity instead
            # of comparing every table's columns (80 look-ups per report).
            key = frozenset(self.schema.tables.items())
            self._schema_key = self.memo.setdefault(("schema-key", key), key)
        return self._schema_key

    def table_link(self, table: str | None, row_ids: list[Any]) -> str | None:
        """A Datasette table URL filtered to the sampled rows."""
        if not self.database or not table:
            return None
        if not row_ids:
            return self.urls.table(self.database, table)
        return self.urls.table(self.database, table, id__in=",".join(str(i) for i in row_ids))

    def query_link(self, name: str, params: dict[str, str] | None = None) -> str | None:
        """The URL of a canned query on this session's database."""
        if not self.database:
            return None
        return self.urls.query(self.database, name, **(params or {}))


class Check(abc.ABC):
    """A named integrity rule. Subclasses set the attributes and implement `run`.

    `id` is unique among registered checks; `kind` is the finding id it reports (several checks
    may share a kind, e.g. one per table).
    """

    # Declared, not defaulted, so dataclass subclasses may order their fields freely.
    id: str
    kind: str
    explanation: str
    severity: str | None  # None or absent: the default severity of `kind`
    title: str | None
    # A check that reads every page of the file (SQLite's integrity_check): given a second
    # connection (`check_session(reopen=...)`), it runs there while the others run here.
    reads_whole_file: bool = False

    def finding(self, ctx: CheckContext, **values: Any) -> Finding:
        """A Finding pre-filled with this check's identity and severity.

        The same object `Finding(**identity, **values)` makes, its fields set in one dict
        (a report makes ~50, 10,000 reports a first index build): the dataclass's keyword
        call was a tenth of a small ledger's quick check."""
        made = object.__new__(Finding)
        made.__dict__.update(
            FINDING_DEFAULTS,
            kind=self.kind,
            severity=getattr(self, "severity", None) or kind_severity(self.kind),
            title=getattr(self, "title", None) or kind_title(self.kind),
            explanation=getattr(self, "explanation", ""),
            check=self.id,
            row_ids=[],
            details={},
        )
        made.__dict__.update(values)
        return made

    def not_applicable(self, ctx: CheckContext, note: str, table: str | None = None) -> Finding:
        return self.finding(ctx, applicable=False, note=note, table=table)

    @abc.abstractmethod
    def run(self, ctx: CheckContext) -> list[Finding]:
        """Findings for this check; never raise for what a file lacks: report not-applicable."""


@dataclass(frozen=True)
class RowVerdict:
    """One finding on one ledger row, as a page shows it."""

    kind: str
    severity: str
    title: str
    check: str


class RowVerdicts:
    """The rule book's findings per ledger row: (table, row id) -> its verdicts.

    The only source of row-level findings for the pages (trace graph, event pages, OTLP): they
    show what the check engine decided for the rows they show, and decide nothing themselves.
    """

    def __init__(self, findings: list[Finding]):
        self._rows: dict[tuple[str, Any], list[RowVerdict]] = {}
        for finding in findings:
            if not finding.applicable or not finding.table:
                continue
            verdict = RowVerdict(finding.kind, finding.severity, finding.title, finding.check)
            for row_id in finding.offending:
                found = self._rows.setdefault((finding.table, row_id), [])
                if verdict.kind not in {v.kind for v in found}:
                    found.append(verdict)

    def of(self, table: str, row_id: Any) -> list[RowVerdict]:
        return self._rows.get((table, row_id), [])

    def has(self, table: str, row_id: Any, kind: str) -> bool:
        return any(v.kind == kind for v in self.of(table, row_id))

    def rows(self) -> dict[tuple[str, Any], list[RowVerdict]]:
        return dict(self._rows)


NO_VERDICTS = RowVerdicts([])


SEVERITY_ZEROS = {s.value: 0 for s in Severity}


def verdict_of(problems: list[Finding]) -> str:
    """A report's verdict from its problems (`Report.verdict`)."""
    severities = {f.severity for f in problems}
    if Severity.ERROR.value in severities:
        return "error"
    if Severity.WARNING.value in severities:
        return "warning"
    return "ok"


@dataclass
class Report:
    """The integrity report of one session: every check's finding plus file facts."""

    findings: list[Finding]
    era: str
    live: bool
    session: dict[str, Any] | None = None
    database: str | None = None
    tables: dict[str, int] = field(default_factory=dict)
    duration_ms: float = 0.0
    migrated: bool = False

    @property
    def problems(self) -> list[Finding]:
        """Applicable findings with offending rows, most severe first."""
        found = [f for f in self.findings if f.problem]
        return sorted(found, key=lambda f: (Severity.rank(f.severity), f.kind, f.table or ""))

    @property
    def verdict(self) -> str:
        """'error' if any error-level problem, else 'warning' if any warning, else 'ok'."""
        return verdict_of(self.problems)

    def row_verdicts(self) -> RowVerdicts:
        return RowVerdicts(self.findings)

    def severity_counts(self, problems: list[Finding] | None = None) -> dict[str, int]:
        """Problems per severity; `problems`: `self.problems`, when the caller has it."""
        counts = dict(SEVERITY_ZEROS)
        for finding in self.problems if problems is None else problems:
            counts[finding.severity] = counts.get(finding.severity, 0) + 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        return {**self._head(), "findings": [f.to_dict() for f in self.findings]}

    def _head(self) -> dict[str, Any]:
        """`to_dict` but its findings (the last key)."""
        problems = self.problems  # once: the verdict and the counts are both of it
        return {
            "session": self.session,
            "database": self.database,
            "era": self.era,
            "migrated": self.migrated,
            "live": self.live,
            "verdict": verdict_of(problems),
            "problems": self.severity_counts(problems),
            "tables": dict(self.tables),
            "duration_ms": round(self.duration_ms, 1),
        }

    def to_json(self) -> str:
        """`json.dumps(self.to_dict(), separators=(",", ":"))`, the very text, made faster:
        most findings of a report passed or do not apply, and such a finding's JSON is the
        same in every report of files of one shape (`_finding_json`). Raises what that
        `json.dumps` raises (TypeError, ValueError) for a value JSON cannot hold."""
        head = json.dumps(self._head(), separators=JSON_SEPARATORS)
        found = ",".join([_finding_json(f) for f in self.findings])
        return f'{head[:-1]},"findings":[{found}]}}'


JSON_SEPARATORS = (",", ":")
# The JSON of findings without rows (`_finding_json`), by their fields: a few per check and
# file shape (~90 a shape, ~0.6 KB each). Cleared when full (a home of very many shapes).
FINDING_JSON_MAX = 4096
_finding_json_memo: dict[tuple, str] = {}
# A finding's fields its JSON is made of when it names no rows, text ones first.
_TEXT_FIELDS = ("kind", "check", "severity", "table", "title", "explanation", "note", "link")
_finding_key = operator.itemgetter(*_TEXT_FIELDS, "failed", "count", "applicable")
_PLAIN = (str, type(None))


def _finding_json(finding: Finding) -> str:
    """`json.dumps(finding.to_dict(), separators=(",", ":"))`, memoized for a finding that
    names no rows (passed, or does not apply): its JSON is then a function of `_finding_key`
    (a few per check and file shape, the same in every report).

    Only a key of plain values is kept: text or None, an int count and a bool `applicable`.
    A finding of other types cannot find a kept key (True equals 1 and 0 equals 0.0 as keys
    but not in JSON, hence the two type tests first; nothing but a str equals a str, nor
    None None), and is encoded as it is."""
    values = finding.__dict__
    key = None
    if (
        not values["row_ids"]
        and not values["details"]
        and type(values["count"]) is int
        and type(values["applicable"]) is bool
    ):
        key = _finding_key(values)
        try:
            held = _finding_json_memo.get(key)
        except TypeError:  # an unhashable value
            held, key = None, None
        if held is not None:
            return held
    text = json.dumps(finding.to_dict(), separators=JSON_SEPARATORS)
    if key is not None and all(type(part) in _PLAIN for part in key[:-2]):
        if len(_finding_json_memo) >= FINDING_JSON_MAX:
            _finding_json_memo.clear()
        _finding_json_memo[key] = text
    return text
