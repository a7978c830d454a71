"""The session overview: identity, counts, providers, verdict and traces, for every kind and
era of session, and clear 4xx answers to bad input."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
import pytest_asyncio

from datasette_capsem.checks import Check, hookimpl
from datasette_capsem.checks.cache import ReportCache
from datasette_capsem.graph.exchanges import is_ambient
from datasette_capsem.plugins import plugin_manager
from datasette_capsem.views.integrity import report_cache
from tests.helpers import make_datasette, session_in, sessions_in
from tests.trace_support import (
    clean_current,
    defect_sessions,
    hostile_session,
    ledger,
    of_era,
    session_url,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("session-page-cache")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def datasette(capsem_home, cache_dir):
    return await make_datasette(capsem_home, cache_dir, index_refresh_seconds=0)


async def test_every_session_of_the_manifest_has_a_page(datasette, manifest):
    for session in manifest["sessions"]:
        html = await datasette.client.get(session_url(session["id"]))
        assert html.status_code == 200, (session["id"], html.text[:500])
        data = (await datasette.client.get(session_url(session["id"], ".json"))).json()
        assert data["session"]["id"] == session["id"]
        if session.get("name") and session["name"] != session["id"]:
            assert data["display_name"] == session["name"]
        if session.get("broken") in ("zero_bytes", "truncated", "not_sqlite"):
            assert data["problem"].startswith(session["broken"])
            assert data["integrity"]["verdict"] == "error"
        elif not session.get("ledger"):
            assert any("No session.db on disk" in note for note in data["notes"])


async def test_counts_and_traces_match_the_ledger(datasette, manifest, capsem_home, cache_dir):
    for session in clean_current(manifest)[:4]:
        data = (await datasette.client.get(session_url(session["id"], ".json"))).json()
        for table, count in session["counts"].items():
            assert data["counts"][table] == count, table
        # Turns are UUID traces; each model call of the 16-hex ambient trace is an exchange.
        assert data["era"] and {t["trace_id"] for t in data["traces"]} == set(session["traces"])
        turns = [t for t in session["traces"] if not is_ambient(t)]
        assert data["turns"] == len(turns)
        assert data["traces_total"] == data["turns"] + data["exchanges"]
        starts = [t["start"] for t in data["traces"]]
        assert starts == sorted(starts, reverse=True)  # newest first
        with ledger(capsem_home, session, cache_dir) as conn:
            ambient = conn.execute(
                "SELECT count(*) FROM model_calls WHERE length(trace_id) = 16"
            ).fetchone()[0]
            assert data["exchanges"] == ambient
            for trace in data["traces"]:
                if trace["exchange"] is not None:
                    calls = conn.execute(
                        "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM model_calls "
                        "WHERE id = ? AND trace_id = ?",
                        [trace["exchange"], trace["trace_id"]],
                    ).fetchone()
                    assert calls[0] == trace["model_calls"] == 1
                    assert trace["href"].endswith(f"?exchange={trace['exchange']}")
                    continue
                calls = conn.execute(
                    "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM model_calls "
                    "WHERE trace_id = ?",
                    [trace["trace_id"]],
                ).fetchone()
                assert (trace["model_calls"], trace["input_tokens"], trace["output_tokens"]) == (
                    tuple(calls)
                )
                last = conn.execute(
                    "SELECT stop_reason FROM model_calls WHERE trace_id = ? "
                    "ORDER BY timestamp DESC, id DESC LIMIT 1",
                    [trace["trace_id"]],
                ).fetchone()[0]
                assert trace["final_stop_reason"] == last
                emitted = conn.execute(
                    "SELECT count(*) FROM tool_calls WHERE model_call_id IN "
                    "(SELECT id FROM model_calls WHERE trace_id = ?)",
                    [trace["trace_id"]],
                ).fetchone()[0]
                assert trace["tool_calls"] == emitted
                assert trace["href"].endswith(trace["trace_id"])
        totals = session["totals"]
        assert sum(p["input_tokens"] for p in data["providers"]) == totals["input_tokens"]
        assert sum(p["cost_usd"] for p in data["providers"]) == pytest.approx(totals["cost"])


async def test_traces_are_paginated(datasette, manifest):
    session = clean_current(manifest)[0]
    first = (await datasette.client.get(session_url(session["id"], ".json?_size=1"))).json()
    assert len(first["traces"]) == 1 and first["next"] == 1
    seen = [first["traces"][0]["trace_id"]]
    offset = first["next"]
    while offset is not None:
        page = (
            await datasette.client.get(session_url(session["id"], f".json?_size=1&_next={offset}"))
        ).json()
        seen += [t["trace_id"] for t in page["traces"]]
        offset = page["next"]
    assert sorted(seen) == sorted(session["traces"]) and len(seen) == len(set(seen))


async def test_integrity_verdict_is_shown(datasette, manifest):
    clean = clean_current(manifest)[0]
    data = (await datasette.client.get(session_url(clean["id"], ".json"))).json()
    assert data["integrity"]["available"] is True
    assert data["integrity"]["verdict"] in ("ok", "warning")
    broken, _defect = defect_sessions(manifest, "orphan_tool_response")[0]
    data = (await datasette.client.get(session_url(broken["id"], ".json"))).json()
    assert data["integrity"]["verdict"] == "error"
    assert "orphan_tool_response" in {f["kind"] for f in data["integrity"]["findings"]}
    html = (await datasette.client.get(session_url(broken["id"]))).text
    assert "Tool response with no matching call earlier in the session" in html


async def test_older_eras_degrade_with_a_note(datasette, manifest):
    for era in ("0.16", "1.1", "migrated"):
        for session in of_era(manifest, era):
            data = (await datasette.client.get(session_url(session["id"], ".json"))).json()
            assert data["era"], session["id"]
            assert data["notes"], session["id"]
            if era == "0.16":
                assert data["mcp_rows"], "MCP calls of old files are shown as MCP rows"
                assert any("event ids" in note for note in data["notes"])


async def test_a_display_name_redirects_to_the_id(datasette, manifest):
    named = session_in(manifest, name="co-work-1")
    response = await datasette.client.get(session_url("co-work-1", ".json?_size=2"))
    assert response.status_code == 302
    assert response.headers["location"] == session_url(named["id"], ".json?_size=2")


@pytest.mark.parametrize(
    "path, status",
    [
        ("/-/capsem/sessions/no-such-session", 404),
        ("/-/capsem/sessions/" + "x" * 300, 400),
        ("/-/capsem/sessions/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", 404),
        ("/-/capsem/sessions/..%2F..%2Fsessions%2Fmain", 404),
        ("/-/capsem/sessions/a%00b", 400),
    ],
)
async def test_bad_session_ids_get_a_clear_4xx(datasette, path, status):
    response = await datasette.client.get(path)
    assert response.status_code == status, response.text[:300]
    assert "Traceback" not in response.text


@pytest.mark.parametrize("query", ["_size=0", "_size=abc", "_next=-1", "_size=99999", "_next=1e9"])
async def test_bad_pagination_is_a_400(datasette, manifest, query):
    session = clean_current(manifest)[0]
    response = await datasette.client.get(session_url(session["id"], f"?{query}"))
    assert response.status_code == 400


async def test_hostile_values_are_escaped(datasette, manifest):
    session = hostile_session(manifest)
    html = (await datasette.client.get(session_url(session["id"]))).text
    assert "<script>window.__pwned" not in html
    assert "<img src=x" not in html


# -- the integrity report: quick profile, cached while the ledger is unchanged ---------------


class CountedCheck(Check):
    """An outside check that counts how often the engine runs it."""

    id = kind = "counted_runs"
    severity = "info"
    title = "Counted"
    explanation = "Counts its runs, for a test of the report cache."

    def __init__(self):
        self.runs = 0

    def run(self, ctx):
        self.runs += 1
        return [self.finding(ctx)]


class CountingPlugin:
    def __init__(self):
        self.check = CountedCheck()

    @hookimpl
    def capsem_checks(self):
        return [self.check]


@pytest.fixture
def counting_check():
    plugin = CountingPlugin()
    plugin_manager().register(plugin)
    try:
        yield plugin.check
    finally:
        plugin_manager().unregister(plugin)


async def test_the_overview_report_is_computed_once_per_ledger_state(
    datasette, manifest, counting_check
):
    session = clean_current(manifest)[1]
    cache = report_cache(datasette)
    first = (await datasette.client.get(session_url(session["id"], ".json"))).json()["integrity"]
    runs, checked = cache.runs, counting_check.runs
    assert checked <= 1  # 0 when an earlier test of this module already viewed the session
    for _ in range(3):
        again = (await datasette.client.get(session_url(session["id"], ".json"))).json()
        again = again["integrity"]
        assert again["cached"] is True
        assert again["computed_at"] == first["computed_at"]
        assert again["verdict"] == first["verdict"]
    html = (await datasette.client.get(session_url(session["id"]))).text
    assert cache.runs == runs and counting_check.runs == checked, "the checks ran again"
    assert first["profile"] == "quick" and "quick_check" in first["profile_note"]
    assert f'href="{session_url(session["id"], "/check")}"' in html
    assert "Quick check" in html and first["computed_at"] in html


async def test_the_overview_runs_the_quick_profile_and_the_check_page_the_full_one(
    datasette, manifest
):
    broken, _defect = defect_sessions(manifest, "blob_hash_mismatch")[0]
    overview = (await datasette.client.get(session_url(broken["id"], ".json"))).json()
    full = (await datasette.client.get(session_url(broken["id"], "/check.json"))).json()
    fired = {f["kind"] for f in full["findings"] if f["problem"]}
    assert "blob_hash_mismatch" in fired  # the full check hashes every stored body
    assert "blob_hash_mismatch" not in {f["kind"] for f in overview["integrity"]["findings"]}
    assert overview["integrity"]["profile"] == "quick"
    assert "not hashed" in overview["integrity"]["profile_note"]
    # Everything else the full check finds, the quick profile finds too.
    assert {f["kind"] for f in overview["integrity"]["findings"]} == fired - {"blob_hash_mismatch"}
    # The report reuses the page's row counts instead of counting again.
    for table, count in overview["integrity"]["tables"].items():
        assert overview["counts"][table] == count == full["tables"][table], table
    # quick_check stands in for integrity_check: it does not compare index contents with
    # their tables, so a damaged index is the full check's to find (the page links to it).
    not_ready = [d["session"] for d in manifest["defects"] if d["kind"] == "schema_not_ready"]
    assert not_ready
    for session_id in not_ready:
        full = (await datasette.client.get(session_url(session_id, "/check.json"))).json()
        found = next(f for f in full["findings"] if f["kind"] == "schema_not_ready")
        assert found["problem"] and "missing from index" in found["details"]["file"]
        quick = (await datasette.client.get(session_url(session_id, ".json"))).json()
        assert "index" in quick["integrity"]["profile_note"]
        assert quick["integrity"]["full_check"] == session_url(session_id, "/check")


async def test_the_overview_report_is_recomputed_when_the_ledger_changes(
    manifest, tmp_path, private_home
):
    home = private_home
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    session = clean_current(manifest)[0]
    url = session_url(session["id"], ".json")
    before = (await datasette.client.get(url)).json()
    cache = report_cache(datasette)
    assert cache.runs == 1 and len(cache) == 1
    assert (await datasette.client.get(url)).json()["integrity"]["cached"] is True
    conn = sqlite3.connect(home / session["ledger"])
    try:
        conn.execute(
            "INSERT INTO net_events (timestamp, domain, decision) "
            "VALUES ('2026-08-01T12:00:00.000000Z', 'appended.example.com', 'allowed')"
        )
        conn.commit()
    finally:
        conn.close()
    after = (await datasette.client.get(url)).json()
    assert after["integrity"]["cached"] is False
    assert cache.runs == 2 and len(cache) == 1  # the stale report was replaced, not kept
    assert after["integrity"]["computed_at"] > before["integrity"]["computed_at"]
    added = before["integrity"]["tables"]["net_events"] + 1
    assert after["integrity"]["tables"]["net_events"] == added == after["counts"]["net_events"]
    assert (await datasette.client.get(url)).json()["integrity"]["cached"] is True
    assert cache.runs == 2
    other = await make_datasette(home, tmp_path / "cache-2", index_refresh_seconds=0)
    assert report_cache(other) is not cache and report_cache(other).runs == 0


async def test_the_report_cache_is_bounded_and_shares_a_run():
    cache = ReportCache(size=2)
    gate = asyncio.Event()

    async def slow():
        await gate.wait()
        return {"verdict": "ok"}

    both = asyncio.gather(cache.get("a", 1, slow), cache.get("a", 1, slow))
    await asyncio.sleep(0)
    gate.set()
    (first, _), (second, _) = await both
    assert first is second and cache.runs == 1  # two concurrent views, one run

    async def quick():
        return {"verdict": "ok"}

    await cache.get("b", 1, quick)
    await cache.get("c", 1, quick)
    assert len(cache) == 2 and cache.fresh("a", 1) is None  # least recently used went first
    assert cache.fresh("c", 1) is not None and cache.fresh("c", 2) is None  # file changed


async def test_an_unreadable_sessions_page_offers_no_dead_links(datasette, manifest):
    """It offered "browse tables" and "timeline" (both 422) and titled "Turns () and ambient
    exchanges ()"."""
    broken = sessions_in(
        manifest, where=lambda s: s.get("broken") in ("zero_bytes", "truncated", "not_sqlite")
    )
    assert broken
    for session in broken:
        html = (await datasette.client.get(session_url(session["id"]))).text
        assert "The ledger cannot be read" in html
        assert "browse tables" not in html and ">timeline</a>" not in html
        assert "Turns ()" not in html and "exchanges ()" not in html
        assert "its turns cannot be listed" in html
        timeline = await datasette.client.get(session_url(session["id"]) + "/timeline")
        assert timeline.status_code == 422  # what the removed link led to
    gone = session_in(manifest, lacks=("ledger",))
    html = (await datasette.client.get(session_url(gone["id"]))).text
    assert "Turns ()" not in html and "No ledger on disk, so no turns to list" in html


async def test_an_overview_finding_links_the_check_pages_plain_evidence(datasette, manifest):
    """The overview's findings linked only raw rows, skipping the check page's sentences
    ("body is 3 bytes but stored_bytes says 40"); each now also links its evidence there."""
    seen = 0
    for session in manifest["sessions"]:
        if not session.get("ledger") or session.get("clean") or session.get("broken"):
            continue
        data = (await datasette.client.get(session_url(session["id"], ".json"))).json()
        findings = [f for f in data["integrity"].get("findings") or [] if f.get("link")]
        if not findings:
            continue
        html = (await datasette.client.get(session_url(session["id"]))).text
        table = html.split('class="rows-and-columns capsem-findings"', 1)[1].split("</table>")[0]
        for finding in findings:
            check = f"{session_url(session['id'])}/check#finding-{finding['kind']}"
            assert f'<a class="capsem-evidence" href="{check}">' in table, finding["kind"]
            assert f'href="{finding["link"].replace("&", "&amp;")}"' in table
        page = await datasette.client.get(f"{session_url(session['id'])}/check")
        assert f'id="finding-{findings[0]["kind"]}"' in page.text
        seen += 1
        if seen == 3:
            break
    assert seen
