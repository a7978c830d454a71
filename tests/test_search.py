"""Search for any id across sessions: through the cross-session index, through the bounded
fallback scan of ledgers it does not cover, and the two agree."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest
import pytest_asyncio

from datasette_capsem.session import search as ledger_search
from datasette_capsem.session.search import scan_ledgers
from tests.helpers import make_datasette, session_in
from tests.trace_support import by_id, clean_current, ledger, readable

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("search-cache")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scanning(capsem_home, cache_dir):
    """An instance whose index has not been built: every search scans the ledgers."""
    return await make_datasette(capsem_home, cache_dir, index_refresh_seconds=0)


async def search(datasette, value: str) -> dict:
    response = await datasette.client.get(f"/-/capsem/search.json?q={quote(value, safe='')}")
    assert response.status_code == 200, response.text[:300]
    return response.json()


def places(data: dict) -> set[tuple[str, str, str]]:
    return {(h["session_id"], h["id_kind"], h["table_name"]) for h in data["hits"]}


async def test_a_trace_id_is_found_in_its_session(scanning, manifest):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    data = await search(scanning, trace)
    assert data["index"]["used"] is False or data["index"]["covered"] == 0
    assert data["scan"]["complete"] is True
    assert {h["session_id"] for h in data["hits"]} == {session["id"]}
    assert (session["id"], "trace_id", "model_calls") in places(data)
    hit = next(h for h in data["hits"] if h["table_name"] == "model_calls")
    assert hit["href"] == f"/-/capsem/sessions/{session['id']}/traces/{trace}"
    html = (await scanning.client.get(f"/-/capsem/search?q={trace}")).text
    assert hit["href"] in html


async def test_forked_rows_are_found_in_both_sessions(scanning, manifest):
    fork = session_in(manifest, has=("forked_from", "traces"))
    parent = (
        by_id(manifest, fork["forked_from"])
        if any(s["id"] == fork["forked_from"] for s in manifest["sessions"])
        else session_in(manifest, name=fork["forked_from"])
    )
    shared = sorted(set(parent["traces"]) & set(fork["traces"]))
    assert shared, "a fork starts with its parent's rows"
    data = await search(scanning, shared[0])
    assert {parent["id"], fork["id"]} <= {h["session_id"] for h in data["hits"]}


async def test_event_call_and_message_ids(scanning, manifest, capsem_home, cache_dir):
    session = clean_current(manifest)[1]
    with ledger(capsem_home, session, cache_dir) as conn:
        call = conn.execute(
            "SELECT event_id, message_id, trace_id FROM model_calls "
            "WHERE message_id IS NOT NULL LIMIT 1"
        ).fetchone()
        tool = conn.execute(
            "SELECT call_id, trace_id FROM tool_calls WHERE model_call_id IS NOT NULL LIMIT 1"
        ).fetchone()
    data = await search(scanning, call["event_id"])
    hit = next(h for h in data["hits"] if h["id_kind"] == "event_id")
    assert hit["href"] == f"/-/capsem/sessions/{session['id']}/events/{call['event_id']}"
    data = await search(scanning, tool["call_id"])
    assert {(session["id"], "call_id", "tool_calls")} <= places(data)
    assert any(h["href"].endswith(f"/traces/{tool['trace_id']}") for h in data["hits"])
    data = await search(scanning, call["message_id"])
    assert (session["id"], "message_id", "model_calls") in places(data)


async def test_sessions_by_id_and_by_name(scanning, manifest):
    session = clean_current(manifest)[0]
    data = await search(scanning, session["id"])
    assert [s["id"] for s in data["sessions"]] == [session["id"]]
    named = session_in(manifest, name="co-work-1")
    data = await search(scanning, "co-work-1")
    assert named["id"] in {s["id"] for s in data["sessions"]}
    assert all(s["href"].startswith("/-/capsem/sessions/") for s in data["sessions"])


async def test_the_index_answers_for_the_sessions_it_covers(indexed_datasette, scanning, manifest):
    session = clean_current(manifest)[2]
    trace = session["traces"][-1]
    through_index = await search(indexed_datasette, trace)
    assert through_index["index"]["used"] is True
    assert through_index["index"]["covered"] >= len(clean_current(manifest))
    assert through_index["scan"]["wanted"] < len(readable(manifest))
    scanned = await search(scanning, trace)
    assert {h["session_id"] for h in through_index["hits"]} == {
        h["session_id"] for h in scanned["hits"]
    }
    trace_hits = [h for h in through_index["hits"] if h["id_kind"] == "trace_id"]
    assert trace_hits and all(h["href"].endswith(f"/traces/{trace}") for h in trace_hits)


async def test_nothing_found_and_bad_queries(scanning):
    data = await search(scanning, "no-such-id-anywhere")
    assert data["hits"] == [] and data["sessions"] == []
    assert (await scanning.client.get("/-/capsem/search")).status_code == 200
    assert (await scanning.client.get("/-/capsem/search?q=a%00b")).status_code == 400
    assert (await scanning.client.get("/-/capsem/search?q=" + "x" * 300)).status_code == 400
    html = (await scanning.client.get("/-/capsem/search?q=%3Cscript%3Ex")).text
    assert "<script>x" not in html


async def test_the_fallback_scan_is_bounded(manifest, capsem_home, tmp_path):
    ledgers = [(s["id"], capsem_home / s["ledger"]) for s in readable(manifest)]
    trace = clean_current(manifest)[0]["traces"][0]
    hits, report = scan_ledgers(ledgers, trace, tmp_path, max_ledgers=3)
    assert report.scanned + len(report.unreadable) <= 3
    assert report.skipped == len(ledgers) - 3
    assert report.to_dict()["complete"] is False
    _hits, timed_out = scan_ledgers(ledgers, trace, tmp_path, seconds=0.0)
    assert timed_out.scanned + timed_out.skipped + len(timed_out.unreadable) == len(ledgers)
    full, complete = scan_ledgers(ledgers, trace, tmp_path)
    assert complete.skipped == 0 and any(h["id_kind"] == "trace_id" for h in full)


def _sorted_hits(hits: list[dict]) -> list[tuple]:
    return sorted(tuple(sorted(hit.items())) for hit in hits)


async def test_a_second_scan_reads_no_schema_again(manifest, capsem_home, tmp_path):
    """Each ledger's schema is kept by its file fingerprint: a scan over ledgers that did not
    change since the last one reads none of their schemas again, and finds the same."""
    ledger_search.schemas.clear()
    ledgers = [(s["id"], capsem_home / s["ledger"]) for s in readable(manifest)]
    trace = clean_current(manifest)[0]["traces"][0]
    first_hits, first = scan_ledgers(ledgers, trace, tmp_path, seconds=600)
    assert first.skipped == 0 and first.scanned > 10
    # Each ledger once (two sessions may share one ledger file: read once or twice).
    assert len({str(path) for _sid, path in ledgers}) <= first.schemas_read <= first.scanned
    again_hits, again = scan_ledgers(ledgers, trace, tmp_path, seconds=600)
    assert again.scanned == first.scanned and again.unreadable == first.unreadable
    assert again.schemas_read == 0
    assert _sorted_hits(again_hits) == _sorted_hits(first_hits) and first_hits


def _change(path: Path, sql: str, mtime_ns: int) -> None:
    """Change the test's own copy of a ledger (never a file of the Capsem home)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()
    os.utime(path, ns=(mtime_ns, mtime_ns))  # a new version even on a coarse clock


async def test_a_changed_ledger_has_its_schema_read_again(manifest, capsem_home, tmp_path):
    """A ledger whose file changed (size, mtime or its WAL's) is read again: a table that came
    back under its name is searched again."""
    ledger_search.schemas.clear()
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    copy = tmp_path / "copy" / "session.db"
    copy.parent.mkdir()
    shutil.copyfile(capsem_home / session["ledger"], copy)
    found = {
        (h["table_name"], h["id_kind"]) for h in scan_ledgers([("s", copy)], trace, tmp_path)[0]
    }
    assert ("model_calls", "trace_id") in found
    stat = copy.stat()
    _change(copy, "ALTER TABLE model_calls RENAME TO model_calls_gone", stat.st_mtime_ns + 10**9)
    hits, report = scan_ledgers([("s", copy)], trace, tmp_path)
    assert report.schemas_read == 1
    assert ("model_calls", "trace_id") not in {(h["table_name"], h["id_kind"]) for h in hits}
    _hits, unchanged = scan_ledgers([("s", copy)], trace, tmp_path)
    assert unchanged.schemas_read == 0
    _change(
        copy, "ALTER TABLE model_calls_gone RENAME TO model_calls", stat.st_mtime_ns + 2 * 10**9
    )
    hits, report = scan_ledgers([("s", copy)], trace, tmp_path)
    assert report.schemas_read == 1
    assert {(h["table_name"], h["id_kind"]) for h in hits} == found
