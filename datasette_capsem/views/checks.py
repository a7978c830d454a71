"""`/-/capsem/sessions/<id>/check` and `.json`: the integrity report of one session.

The report runs in a Datasette SQL thread on the session's mounted, read-only ledger. A session
with no ledger on disk still gets the checks about its main.db row; an unreadable ledger gets
the same 422 page every session page gives.
"""

from __future__ import annotations

from typing import Any

from datasette_capsem import errors
from datasette_capsem.checks import Report, check_session
from datasette_capsem.findings import Severity
from datasette_capsem.views import render
from datasette_capsem.views.opening import Opened, open_session


async def _report(opened: Opened, database: str) -> Report:
    session = opened.session
    if opened.db is None:
        return check_session(None, session=session, live=session.live, database=database)

    def run(conn):
        return check_session(conn, session=session, live=session.live, database=database)

    return await opened.db.execute_fn(run)


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
    report = await _report(opened, opened.links.database)
    data = _with_base(datasette, report.to_dict())
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
