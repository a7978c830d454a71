"""Issue 29: what keeps a home of 100,000 sessions as cheap as one of 100, on a small home
with the bounds lowered: a big list is never built inside a request, the index's figures
are never read inside one, the findings page shows a bounded page of each kind, lookups by
name and id prefix are lookups, and sessions without a ledger are checked in the refreshing
process (benchmarks/bench_scale.py has the figures; no test asserts a time)."""

from __future__ import annotations

from collections import Counter

import pytest

from datasette_capsem.catalog import Catalog
from datasette_capsem.config import load_settings
from datasette_capsem.index import parallel, verdicts
from datasette_capsem.state import get_state
from tests.helpers import make_datasette, until

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_big_list_is_answered_at_once_and_completed_by_a_thread(capsem_home, built_cache):
    datasette = await make_datasette(capsem_home, built_cache)
    state = get_state(datasette)
    state.session_table.build_in_request_up_to = 0  # every list counts as big here
    state.session_table.provisional_rows = 3
    sessions = state.catalog.sessions()  # newest first
    assert state.index._snapshot is None  # the stored figures are not read yet

    with state.session_table._lock:  # the thread building the whole list waits for this
        first = (await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
        page = await datasette.client.get("/")
    # Neither the index's figures nor the whole list were waited for: the newest sessions.
    assert first["partial"] == {"sessions": len(sessions), "shown": 3}
    assert [row["id"] for row in first["sessions"]] == [s.id for s in sessions[:3]]
    assert page.status_code == 200
    assert "is still being prepared" in page.text

    async def complete():
        found = (await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
        return found if found["partial"] is None else None

    whole = await until(complete, "the whole list")
    assert [row["id"] for row in whole["sessions"]] == [s.id for s in sessions]
    assert any(row["indexed"] for row in whole["sessions"]), "the stored figures were read"
    page = await datasette.client.get("/")
    assert "is still being prepared" not in page.text


async def test_a_small_list_is_still_built_in_the_request(capsem_home, built_cache):
    datasette = await make_datasette(capsem_home, built_cache)
    found = (await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
    assert found["partial"] is None
    assert len(found["sessions"]) == len(get_state(datasette).catalog.sessions())


async def test_the_findings_page_shows_a_bounded_page_of_each_kind(capsem_home, built_cache):
    datasette = await make_datasette(capsem_home, built_cache)
    whole = (await datasette.client.get("/-/capsem/findings.json")).json()["kinds"]
    widest = max(whole, key=lambda k: k["sessions"])
    assert widest["sessions"] > 1
    get_state(datasette).index.finding_hits = 1
    bounded = (await datasette.client.get("/-/capsem/findings.json")).json()["kinds"]
    assert [(k["kind"], k["sessions"], k["rows"]) for k in bounded] == [
        (k["kind"], k["sessions"], k["rows"]) for k in whole
    ]
    for before, after in zip(whole, bounded, strict=True):
        assert after["hits"] == before["hits"][:1]  # the newest
    page = await datasette.client.get("/-/capsem/findings")
    assert f"All {widest['sessions']} sessions in the list" in page.text


async def test_names_and_id_prefixes_are_looked_up_not_scanned(capsem_home, cache_dir):
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})
    snapshot = Catalog(settings).snapshot()
    sessions = list(snapshot.sessions.values())
    names = Counter(s.name for s in sessions if s.name)
    assert names
    for name in names:
        assert {s.id for s in snapshot.by_name[name]} == {s.id for s in sessions if s.name == name}
    for session in sessions:
        for length in (1, 4, 8, len(session.id)):
            prefix = session.id[:length]
            assert {s.id for s in snapshot.with_id_prefix(prefix)} == {
                s.id for s in sessions if s.id.startswith(prefix)
            }
    assert snapshot.with_id_prefix("\uffff") == []


async def test_sessions_without_a_ledger_are_checked_here_between_the_workers_verdicts(
    capsem_home, cache_dir
):
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})
    sessions = Catalog(settings).sessions()
    assert {s.ledger_path is None for s in sessions} == {True, False}
    alone = [verdicts.check(s, settings) for s in sessions]
    workers = iter([v for s, v in zip(sessions, alone, strict=True) if s.ledger_path])
    merged = list(parallel._merged(sessions, settings, workers))
    assert [(v.verdict, v.errors, v.warnings, v.findings) for v in merged] == [
        (v.verdict, v.errors, v.warnings, v.findings) for v in alone
    ]


async def test_a_scan_under_way_is_not_waited_out(capsem_home, cache_dir):
    """Another thread scanning (the start's first scan, or a rescan after main.db changed):
    a request waits a moment, then answers from the previous scan, or says before the first
    one that the sessions are still being read."""
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})
    home = Catalog(settings)._single
    with home._lock:  # a scan under way, before any ended
        assert home.snapshot(wait=0.05) is None
    first = home.snapshot(wait=0.05)
    assert first is not None and first.sessions
    with home._lock:  # a rescan under way: the previous scan answers
        assert home.snapshot(wait=0.05) is first

    datasette = await make_datasette(capsem_home, cache_dir)
    catalog = get_state(datasette).catalog
    total = len(catalog.sessions())
    with catalog._single._lock:
        listed = (await datasette.client.get("/-/capsem/sessions.json?all=1")).json()
        assert listed["total"] == total  # the previous scan's, not waited for
    page = await datasette.client.get("/")
    assert "still being read" not in page.text
