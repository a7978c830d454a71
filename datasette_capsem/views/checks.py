"""`/-/capsem/sessions/<id>/check` and `.json`: the integrity report of one session.

The report (the full profile) runs in a Datasette SQL thread on the session's mounted,
read-only ledger, once per file version: it is kept in the report cache and, for a stopped
session, in the report store of the plugin's cache (checks/cache.py), so a view of an unchanged
file, a restarted server and a second server over the same cache read it back. A big ledger
whose report is in neither is checked in the background: the page answers at once that the
session is being checked (HTTP 202, a page that reloads itself; views/pending.py), and the next
view after the run gets the report. A session with no ledger on disk still gets the checks
about its main.db row; an unreadable ledger gets the same 422 page every session page gives.
"""

from __future__ import annotations

import copy
from typing import Any

from datasette_capsem import errors
from datasette_capsem.checks import check_session
from datasette_capsem.checks.profiles import FULL
from datasette_capsem.findings import Severity
from datasette_capsem.versioned_store import store_key
from datasette_capsem.views import pending, render
from datasette_capsem.views.integrity import ledger_path, on_ledger, report_cache, validator
from datasette_capsem.views.opening import Opened, open_session


async def _report(datasette, opened: Opened, database: str) -> Any:
    """The full report of the session (a dict), held or stored while the file is unchanged,
    else computed once for every view that asks meanwhile; for a big ledger whose report is
    not ready soon, what `pending.pending` recognises (views/pending.py)."""
    session = opened.session

    def run(conn):
        return check_session(conn, session=session, live=session.live, database=database).to_dict()

    async def compute() -> dict[str, Any]:
        return await on_ledger(opened, run)

    cache, key, check = report_cache(datasette), (session.id, FULL), validator(opened)
    held = cache.fresh(key, check)
    if held is not None:
        cache.hits += 1
        return held.report
    stored = store_key(session, ledger_path(opened), FULL)
    found = await pending.within_wait(opened, cache.get(key, check, compute, stored))
    return found if pending.pending(found) else found[0].report


def _with_base(datasette, data: dict[str, Any]) -> dict[str, Any]:
    """Links in the report are root-relative (the engine's `Urls()`); honour base_url."""
    for finding in data["findings"]:
        if finding["link"] and finding["link"].startswith("/"):
            finding["link"] = datasette.urls.path(finding["link"])
    return data


def _by_kind(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per finding kind (explained once), its tables listed inside, worst first."""
    kinds: dict[str, dict[str, Any]] = {}
    for finding in findings:
        entry = kinds.setdefault(
            finding["kind"],
            {
                "kind": finding["kind"],
                "title": finding["title"],
                "severity": finding["severity"],
                "explanation": finding["explanation"],
                "count": 0,
                "parts": [],
            },
        )
        if Severity.rank(finding["severity"]) < Severity.rank(entry["severity"]):
            entry["severity"] = finding["severity"]
        entry["count"] += finding["count"]
        entry["parts"].append(finding)
    return sorted(kinds.values(), key=lambda e: (Severity.rank(e["severity"]), e["kind"]))


def _grouped(findings: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Problems, passed checks and not-applicable checks, each grouped by kind."""
    problems = [f for f in findings if f["problem"]]
    passed = [f for f in findings if f["applicable"] and not f["problem"]]
    skipped = [f for f in findings if not f["applicable"]]
    return {
        "problem_kinds": _by_kind(problems),
        "passed_kinds": _by_kind(passed),
        "skipped_kinds": _by_kind(skipped),
    }


async def check_page(datasette, request):
    opened = await open_session(datasette, request, need_ledger=False)
    if opened.problem is not None:
        whose = f"The ledger of session {opened.session.id} (so it cannot be checked)"
        raise errors.unreadable(opened.problem, whose)
    report = await _report(datasette, opened, opened.links.database)
    if pending.pending(report):
        what = "The full integrity check of this session is running"
        return await pending.page(datasette, request, opened, what, "Integrity report")
    data = _with_base(datasette, copy.deepcopy(report))
    context = {
        **data,
        **_grouped(data["findings"]),
        "session_href": opened.links.session(),
        "display_name": opened.session.display_name,
    }
    return await render.page(datasette, request, "check.html", context, data=data)


ROUTES = [
    (r"^/-/capsem/sessions/(?P<session_id>[^/]+?)/check(?P<format>\.json)?$", check_page),
]
