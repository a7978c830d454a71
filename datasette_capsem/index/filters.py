"""Query parameters of the session list, shared by its page, its JSON and its charts.

The flags of Capsem's `list_sessions.py` (spec §5.2) become parameters: `all`, `with_db`,
`with_model`, `with_net`, `with_tools`, `min_cost`; plus `status`, `kind`, `home` (the label of
a labelled home; repeatable or comma-separated), a created-at range
(`since`, `until`), `q` over ids and names, `matching` (the sessions a full-text query's hits are
in, as the search page groups them; `matching_kind` the kinds it searched), Datasette's
`_sort`/`_sort_desc`, `_size`, `_next`.
Every bad value is a `BadParameter` naming the parameter, answered with a 400.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from datasette_capsem.catalog.models import KINDS
from datasette_capsem.index.listing import SORTABLE
from datasette_capsem.index.text import KINDS as TEXT_KINDS

TRUE_VALUES = ("", "1", "true", "on", "yes")
FALSE_VALUES = ("0", "false", "off", "no")
FLAGS = ("all", "with_db", "with_model", "with_net", "with_tools")
# Verdict filters (the index's quick-check verdicts): at least one error- / warning-level finding
# (an unreadable ledger counts as an error), and has_finding=KIND[,KIND] for any of the kinds.
VERDICT_FLAGS = ("has_errors", "has_warnings")
KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?(\.\d+)?Z?)?$")
DEFAULT_SORT = ("created", True)
MAX_Q_LENGTH = 200


class BadParameter(ValueError):
    """A query parameter the list cannot use; the message says which and why."""


@dataclass
class ListQuery:
    flags: dict[str, bool] = field(default_factory=dict)
    min_cost: float | None = None
    statuses: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    since: str | None = None
    until: str | None = None
    q: str | None = None
    findings: list[str] = field(default_factory=list)  # has_finding kinds
    homes: list[str] = field(default_factory=list)  # labels of labelled homes
    text: str | None = None  # a full-text query: the sessions its hits are in
    text_kinds: list[str] = field(default_factory=list)
    # The ids `text` matched, set by the page from the index before the rows are filtered.
    text_sessions: frozenset[str] | None = None
    sort: str = DEFAULT_SORT[0]
    descending: bool = DEFAULT_SORT[1]
    size: int = 100
    offset: int = 0

    def signature(self) -> tuple:
        """The filters as a hashable key (sorting and paging excluded)."""
        return tuple(
            (k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(self.applied().items())
        )

    def applied(self) -> dict[str, Any]:
        """The filters in force, for the JSON answer and the page's summary."""
        found: dict[str, Any] = {name: True for name, on in self.flags.items() if on}
        for name in ("min_cost", "since", "until", "q"):
            if getattr(self, name) is not None:
                found[name] = getattr(self, name)
        if self.text is not None:
            found["matching"] = self.text
        if self.statuses:
            found["status"] = self.statuses
        if self.kinds:
            found["kind"] = self.kinds
        if self.findings:
            found["has_finding"] = self.findings
        if self.homes:
            found["home"] = self.homes
        if self.text is not None and self.text_kinds:
            found["matching_kind"] = self.text_kinds
        return found


def _flag(args, name: str) -> bool:
    if name not in args:
        return False
    value = args.get(name, "").strip().lower()
    if value in TRUE_VALUES:
        return True
    if value in FALSE_VALUES:
        return False
    raise BadParameter(f"{name} must be 1/true/on or 0/false/off, got {value!r}")


def _min_cost(args) -> float | None:
    raw = (args.get("min_cost") or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise BadParameter(f"min_cost must be a number of dollars, got {raw!r}") from None
    if not math.isfinite(value):
        raise BadParameter(f"min_cost must be a finite number, got {raw!r}")
    return value


def _date(args, name: str, end_of_day: bool) -> str | None:
    """A normalised 'YYYY-MM-DDTHH:MM:SS' bound; a bare date covers the whole day."""
    raw = (args.get(name) or "").strip()
    if not raw:
        return None
    if not DATE_RE.match(raw):
        raise BadParameter(
            f"{name} must be a date YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS], got {raw!r}"
        )
    if len(raw) == 10:
        return raw + ("T23:59:59" if end_of_day else "T00:00:00")
    text = raw.rstrip("Z").split(".")[0]
    return text if len(text) == 19 else text + (":59" if end_of_day else ":00")


def _choices(args, name: str, allowed: tuple[str, ...] | None) -> list[str]:
    values = [v.strip() for raw in args.getlist(name) for v in raw.split(",") if v.strip()]
    if allowed is not None:
        unknown = [v for v in values if v not in allowed]
        if unknown:
            raise BadParameter(f"{name} must be one of {', '.join(allowed)}; got {unknown[0]!r}")
    return values


def _sort(args) -> tuple[str, bool]:
    asc, desc = args.get("_sort"), args.get("_sort_desc")
    if asc and desc:
        raise BadParameter("use either _sort or _sort_desc, not both")
    column = asc or desc
    if not column:
        return DEFAULT_SORT
    if column not in SORTABLE:
        raise BadParameter(f"cannot sort by {column!r}; sortable: {', '.join(SORTABLE)}")
    return column, bool(desc)


def _paging(args, default_size: int, max_size: int) -> tuple[int, int]:
    raw_size = (args.get("_size") or "").strip() or str(default_size)
    raw_next = (args.get("_next") or "").strip() or "0"
    size = max_size if raw_size == "max" else raw_size
    try:
        size, offset = int(size), int(raw_next)
    except ValueError:
        raise BadParameter("_size must be a positive integer or 'max'; _next an offset") from None
    if size < 1 or offset < 0:
        raise BadParameter("_size must be a positive integer or 'max'; _next an offset")
    if size > max_size:
        raise BadParameter(f"_size must be at most {max_size} (or 'max')")
    return size, offset


def parse_query(args, default_size: int, max_size: int) -> ListQuery:
    """Validate every parameter; raises BadParameter."""
    query = ListQuery(flags={name: _flag(args, name) for name in FLAGS + VERDICT_FLAGS})
    query.min_cost = _min_cost(args)
    query.statuses = _choices(args, "status", None)
    query.kinds = _choices(args, "kind", KINDS)
    query.findings = _choices(args, "has_finding", None)
    query.homes = _choices(args, "home", None)
    bad = [kind for kind in query.findings if not KIND_RE.match(kind)]
    if bad:
        raise BadParameter(
            f"has_finding must name finding kinds (e.g. orphan_tool_response), got {bad[0]!r}"
        )
    query.since = _date(args, "since", end_of_day=False)
    query.until = _date(args, "until", end_of_day=True)
    if query.since and query.until and query.since > query.until:
        raise BadParameter("since must not be after until")
    q = (args.get("q") or "").strip()
    if len(q) > MAX_Q_LENGTH:
        raise BadParameter(f"q must be at most {MAX_Q_LENGTH} characters")
    query.q = q or None
    text = (args.get("matching") or "").strip()
    if len(text) > MAX_Q_LENGTH:
        raise BadParameter(f"matching must be at most {MAX_Q_LENGTH} characters")
    query.text = text or None
    query.text_kinds = _choices(args, "matching_kind", TEXT_KINDS)
    query.sort, query.descending = _sort(args)
    query.size, query.offset = _paging(args, default_size, max_size)
    return query


def _created_key(row: dict[str, Any]) -> str | None:
    created = row.get("created_at")
    return str(created).replace(" ", "T")[:19] if created else None


def predicates(query: ListQuery) -> list[Callable[[dict[str, Any]], bool]]:
    """One test per filter in force; a row is listed when it passes them all."""
    tests: list[Callable[[dict[str, Any]], bool]] = []
    flags = query.flags
    if not flags.get("all"):
        tests.append(lambda r: r["status"] != "vacuumed")
    if flags.get("with_db"):
        tests.append(lambda r: r["has_ledger"])
    if flags.get("with_model"):
        tests.append(lambda r: (r["tokens"] or 0) > 0)
    if flags.get("with_net"):
        tests.append(lambda r: (r["requests"] or 0) > 0)
    if flags.get("with_tools"):
        tests.append(lambda r: (r["tool_calls"] or 0) > 0)
    if query.min_cost is not None:
        floor = query.min_cost
        tests.append(lambda r: r["cost"] is not None and r["cost"] >= floor)
    if query.statuses:
        statuses = set(query.statuses)
        tests.append(lambda r: r["status"] in statuses)
    if query.kinds:
        kinds = set(query.kinds)
        tests.append(lambda r: r["kind"] in kinds)
    if query.homes:
        homes = set(query.homes)
        tests.append(lambda r: r.get("home") in homes)
    if query.since:
        since = query.since
        tests.append(lambda r: (_created_key(r) or "") >= since)
    if query.until:
        until = query.until
        tests.append(lambda r: _created_key(r) is not None and _created_key(r) <= until)
    if flags.get("has_errors"):
        tests.append(
            lambda r: bool(r["verdict"]["errors"] or r["verdict"]["state"] == "unreadable")
        )
    if flags.get("has_warnings"):
        tests.append(lambda r: bool(r["verdict"]["warnings"]))
    if query.findings:
        wanted = set(query.findings)
        tests.append(lambda r: not wanted.isdisjoint(r["verdict"]["kinds"]))
    if query.text_sessions is not None:
        matched = query.text_sessions
        tests.append(lambda r: r["id"] in matched)
    if query.q:
        needle = query.q.lower()
        tests.append(lambda r: needle in r["id"].lower() or needle in (r["name"] or "").lower())
    return tests


def home_facet(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(label, sessions) of the rows per labelled home, most sessions first."""
    counts: dict[str, int] = {}
    for row in rows:
        label = row.get("home")
        if label:
            counts[label] = counts.get(label, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def apply(rows: list[dict[str, Any]], query: ListQuery) -> list[dict[str, Any]]:
    tests = predicates(query)
    if not tests:
        return rows
    if len(tests) == 1:
        return list(filter(tests[0], rows))
    return [row for row in rows if all(test(row) for test in tests)]
