"""Problems at a glance: each session's quick-check verdict, computed by the index refresh.

The list, its filters and sorting, and the cross-session findings page read the verdicts the
background refresh stored in the index database; nothing is checked on request. Every verdict
is the check engine's own (the quick profile the session overview shows).
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from datasette_capsem.catalog import Catalog
from datasette_capsem.checks.runner import check_catalog_session
from datasette_capsem.config import load_settings
from datasette_capsem.readonly import LedgerUnavailable
from datasette_capsem.state import get_state
from tests.helpers import make_datasette
from tests.test_index import copy_home, readable, service_for

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("verdict-cache")


@pytest.fixture(scope="module")
def quick_reports(capsem_home, cache_dir) -> dict[str, object]:
    """session id -> the engine's quick report (None when its ledger cannot be read)."""
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})
    reports = {}
    for session in Catalog(settings).sessions():
        try:
            reports[session.id] = check_catalog_session(session, settings, profile="quick")
        except LedgerUnavailable:
            reports[session.id] = None
    return reports


async def indexed(home: Path, cache_dir: Path):
    datasette = await make_datasette(home, cache_dir, index_refresh_seconds=0)
    get_state(datasette).index.refresh()
    return datasette


async def listed(datasette, query: str = "") -> list[dict]:
    response = await datasette.client.get(f"/-/capsem/sessions.json?_size=max&all=1&{query}")
    assert response.status_code == 200, response.text[:500]
    return response.json()["sessions"]


async def test_every_listed_verdict_is_the_engines_quick_verdict(
    capsem_home, cache_dir, quick_reports
):
    datasette = await indexed(capsem_home, cache_dir)
    rows = {r["id"]: r for r in await listed(datasette)}
    assert set(rows) == set(quick_reports)
    states = Counter()
    for session_id, report in quick_reports.items():
        verdict = rows[session_id]["verdict"]
        states[verdict["state"]] += 1
        assert verdict["stale"] is None, session_id
        assert verdict["href"] == f"/-/capsem/sessions/{session_id}/check"
        if report is None:
            assert verdict["state"] == "unreadable", session_id
            continue
        counts = report.severity_counts()
        assert verdict["state"] == report.verdict, session_id
        assert (verdict["errors"], verdict["warnings"], verdict["infos"]) == (
            counts["error"],
            counts["warning"],
            counts["info"],
        ), session_id
        assert verdict["kinds"] == sorted({f.kind for f in report.problems}), session_id
    assert states["error"] >= 10 and states["warning"] >= 5 and states["ok"] >= 10, states


async def test_verdicts_are_queryable_with_sql(capsem_home, cache_dir, quick_reports):
    datasette = await indexed(capsem_home, cache_dir)
    response = await datasette.client.get(
        "/index.json?sql=select+session_id,+verdict+from+session_checks&_shape=array",
        follow_redirects=True,  # 1.0 redirects /<db>.json?sql= to /<db>/-/query.json
    )
    assert response.status_code == 200, response.text[:300]
    stored = {row["session_id"]: row["verdict"] for row in response.json()}
    expected = {sid: (r.verdict if r else "unreadable") for sid, r in quick_reports.items()}
    assert stored == expected


async def test_filters_and_sorting_by_verdict(capsem_home, cache_dir, quick_reports):
    datasette = await indexed(capsem_home, cache_dir)
    reports = {sid: r for sid, r in quick_reports.items() if r is not None}
    unreadable = {sid for sid, r in quick_reports.items() if r is None}
    errors = {sid for sid, r in reports.items() if r.severity_counts()["error"]} | unreadable
    warnings = {sid for sid, r in reports.items() if r.severity_counts()["warning"]}
    assert {r["id"] for r in await listed(datasette, "has_errors=1")} == errors
    assert {r["id"] for r in await listed(datasette, "has_warnings=1")} == warnings
    both = await listed(datasette, "has_errors=1&has_warnings=1")
    assert {r["id"] for r in both} == errors & warnings
    for kind in ("orphan_tool_response", "tool_call_without_response", "rollup_mismatch"):
        hit = {sid for sid, r in reports.items() if kind in {f.kind for f in r.problems}}
        assert hit, kind
        assert {r["id"] for r in await listed(datasette, f"has_finding={kind}")} == hit
    two = await listed(datasette, "has_finding=orphan_tool_response,rollup_mismatch")
    assert len(two) == len(
        {
            sid
            for sid, r in reports.items()
            if {"orphan_tool_response", "rollup_mismatch"} & {f.kind for f in r.problems}
        }
    )
    bad = await datasette.client.get("/-/capsem/sessions.json?has_finding=%3Cscript%3E")
    assert bad.status_code == 400 and "has_finding" in bad.json()["message"]

    ordered = await listed(datasette, "_sort_desc=verdict")
    rank = {"error": 3, "unreadable": 3, "warning": 2, "ok": 1}
    ranks = [rank[r["verdict"]["state"]] for r in ordered]
    assert ranks == sorted(ranks, reverse=True)
    assert ordered[0]["verdict"]["errors"] == max(r["verdict"]["errors"] for r in ordered)
    ascending = await listed(datasette, "_sort=verdict")
    assert rank[ascending[0]["verdict"]["state"]] == 1

    page = await datasette.client.get("/?has_errors=1&_sort_desc=verdict")
    assert page.status_code == 200
    assert page.text.count('class="capsem-verdict-badge capsem-verdict-error"') + page.text.count(
        "capsem-verdict-unreadable"
    ) >= len(errors)
    assert 'name="has_errors" value="1" checked' in page.text


async def test_pending_before_the_index_has_run_and_nothing_checked_on_request(
    capsem_home, tmp_path
):
    datasette = await make_datasette(capsem_home, tmp_path / "cache", index_refresh_seconds=0)
    rows = await listed(datasette)
    assert rows and {r["verdict"]["state"] for r in rows} == {"pending"}
    page = await datasette.client.get("/")
    assert "capsem-verdict-pending" in page.text
    await datasette.client.get("/-/capsem/findings.json")
    assert get_state(datasette).reports.runs == 0  # no check ran for the list or findings


async def test_a_changed_ledger_rechecks_only_itself_and_a_changed_row_is_stale(
    capsem_home, manifest, tmp_path
):
    home = copy_home(capsem_home, tmp_path / "home")
    service = service_for(home, tmp_path / "cache")
    first = service.refresh()
    assert len(first.checked) == len(service.catalog.sessions())
    assert service.refresh().checked == []

    session = next(
        s
        for s in readable(manifest)
        if s["era"] == "head"
        and s["kind"] == "ephemeral"
        and s.get("clean")
        and s["status"] == "stopped"
    )
    assert service.snapshot().checks[session["id"]]["verdict"] == "ok"
    writer = sqlite3.connect(home / session["ledger"])  # a tool response no call emitted
    writer.execute(
        "INSERT INTO tool_responses (model_call_id, call_id, content_preview, is_error, trace_id,"
        " turn_id) SELECT model_call_id, 'toolu_never_called', 'x', 0, trace_id, turn_id"
        " FROM tool_responses ORDER BY id DESC LIMIT 1"
    )
    writer.commit()
    writer.close()
    changed = service.refresh()
    assert changed.checked == [session["id"]]
    stored = service.snapshot().checks[session["id"]]
    assert stored["verdict"] == "error" and "orphan_tool_response" in stored["kinds"]

    # main.db's row changes (the rollup is rewritten): the verdict is stale until re-checked
    other = next(
        s
        for s in readable(manifest)
        if s["status"] == "stopped"
        and s["main_db_row"]
        and s["id"] != session["id"]
        and s["era"] == "head"
        and s.get("clean")
    )
    main = sqlite3.connect(home / manifest["main_db"])
    main.execute(
        "UPDATE sessions SET total_requests = total_requests + 7 WHERE id = ?", [other["id"]]
    )
    main.commit()
    main.close()
    service.catalog.refresh(force=True)
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    state = get_state(datasette)
    state.index._snapshot = service.snapshot()  # the server's view before its next refresh
    row = {r["id"]: r for r in await listed(datasette)}[other["id"]]
    assert row["verdict"]["state"] == "ok" and row["verdict"]["stale"]
    page = await datasette.client.get(f"/-/capsem?q={other['id']}")
    assert "stale" in page.text
    again = state.index.refresh()
    assert again.checked == [other["id"]] and again.indexed == []
    row = {r["id"]: r for r in await listed(datasette)}[other["id"]]
    assert row["verdict"]["state"] == "error" and "rollup_mismatch" in row["verdict"]["kinds"]
    assert row["verdict"]["stale"] is None


async def test_the_findings_page(capsem_home, cache_dir, quick_reports):
    datasette = await indexed(capsem_home, cache_dir)
    response = await datasette.client.get("/-/capsem/findings.json")
    assert response.status_code == 200
    kinds = response.json()["kinds"]
    hits, rows = defaultdict(set), Counter()
    for sid, report in quick_reports.items():
        for finding in report.problems if report else ():
            hits[finding.kind].add(sid)
            rows[finding.kind] += finding.count
    assert {k["kind"] for k in kinds} == set(hits)
    catalog = get_state(datasette).catalog
    severities = [{"error": 0, "warning": 1, "info": 2}[k["severity"]] for k in kinds]
    assert severities == sorted(severities)
    for kind in kinds:
        assert kind["sessions"] == len(hits[kind["kind"]]) == len(kind["hits"])
        assert kind["rows"] == rows[kind["kind"]]
        assert {h["session_id"] for h in kind["hits"]} == hits[kind["kind"]]
        created = [h["created_at"] or "" for h in kind["hits"]]
        assert created == sorted(created, reverse=True)  # newest first
        for hit in kind["hits"]:
            session = catalog.get(hit["session_id"])
            assert hit["session_name"] == session.display_name
            assert hit["href"] == (
                f"/-/capsem/sessions/{hit['session_id']}/check#finding-{kind['kind']}"
            )
    named = [h for k in kinds for h in k["hits"] if h["session_name"]]
    assert named, "some finding hits a named session"

    page = await datasette.client.get("/-/capsem/findings")
    assert page.status_code == 200
    assert "<h1>Integrity findings across sessions</h1>" in page.text
    first = kinds[0]["hits"][0]
    assert f'href="{first["href"]}"' in page.text
    check = await datasette.client.get(first["href"].split("#")[0])
    assert f'id="finding-{kinds[0]["kind"]}"' in check.text
    table = await datasette.client.get("/index/findings_by_kind.json?severity=error&_shape=array")
    assert table.status_code == 200
    assert {r["kind"] for r in table.json()} == {
        k["kind"] for k in kinds if k["severity"] == "error"
    }


async def test_the_findings_page_and_the_lists_with_errors_agree_on_unreadable_ledgers(
    capsem_home, cache_dir, quick_reports
):
    """The list's "with errors" counted unreadable ledgers, the findings page left them out:
    both count them now, and the findings page says why each cannot be read."""
    datasette = await indexed(capsem_home, cache_dir)
    unreadable = {sid for sid, r in quick_reports.items() if r is None}
    assert unreadable
    data = (await datasette.client.get("/-/capsem/findings.json")).json()
    assert {u["session_id"] for u in data["unreadable"]} == unreadable
    assert all(u["problem"] for u in data["unreadable"])
    with_errors = {
        h["session_id"] for k in data["kinds"] if k["severity"] == "error" for h in k["hits"]
    }
    listed_errors = {r["id"] for r in await listed(datasette, "has_errors=1")}
    assert with_errors | {u["session_id"] for u in data["unreadable"]} == listed_errors
    page = await datasette.client.get("/-/capsem/findings")
    section = page.text.split('id="unreadable"', 1)[1]
    for found in data["unreadable"]:
        assert f'href="/-/capsem/sessions/{found["session_id"]}"' in section
        assert found["problem"].split(":")[0] in section
    assert "with errors" in section
