"""The session overview: identity, counts, providers, verdict and traces, for every kind and
era of session, and clear 4xx answers to bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio

from tests.helpers import make_datasette
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
        assert data["era"] and data["traces_total"] == len(session["traces"])
        assert {t["trace_id"] for t in data["traces"]} == set(session["traces"])
        starts = [t["start"] for t in data["traces"]]
        assert starts == sorted(starts, reverse=True)  # newest first
        with ledger(capsem_home, session, cache_dir) as conn:
            for trace in data["traces"]:
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
    assert "Tool response with no matching call in its trace" in html


async def test_older_eras_degrade_with_a_note(datasette, manifest):
    for era in ("march2026", "v1_1", "migrated"):
        for session in of_era(manifest, era):
            data = (await datasette.client.get(session_url(session["id"], ".json"))).json()
            assert data["era"], session["id"]
            assert data["notes"], session["id"]
            if era == "march2026":
                assert data["mcp_rows"], "MCP calls of old files are shown as MCP rows"
                assert any("event ids" in note for note in data["notes"])


async def test_a_display_name_redirects_to_the_id(datasette, manifest):
    named = next(s for s in manifest["sessions"] if s.get("name") == "co-work-1")
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
