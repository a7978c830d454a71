"""Issue 29, memory and start: what each session of a big home costs, a first scan of a big
home that a request does not wait for, and the charts of a list that is not whole yet. Structure, not sizes: a session without a directory holds no path, a ledger's
path is kept as a shared file name, an entry of the list is one tuple; the charts drawn while
the list is being prepared say they cover only part of the sessions
(benchmarks/bench_memory.py has the figures)."""

from __future__ import annotations

import dataclasses
import pickle
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog, Session
from datasette_capsem.catalog.models import LEDGER_NAMES, MainRow
from datasette_capsem.config import load_settings
from datasette_capsem.index.service import IndexService
from datasette_capsem.memory import CompactRow, RowFile, RowPacker, unpack_row
from datasette_capsem.state import get_state
from tests.helpers import HANG, make_datasette, until

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_session_keeps_strings_not_paths(capsem_home, cache_dir):
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})
    sessions = list(Catalog(settings).snapshot().sessions.values())
    without = [s for s in sessions if s.dir_path is None]
    with_ledger = [s for s in sessions if s.ledger_path is not None]
    assert without and with_ledger
    for session in sessions:
        held = [getattr(session, slot) for slot in Session.__slots__]
        assert not any(isinstance(value, Path) for value in held), session.id
        if not session.problems:
            assert session.problems == ()  # no empty list per session
    for session in without:  # a main.db row alone (vacuumed): no path at all
        assert session._dir is None and session._ledger is None and not session.has_ledger
    for session in with_ledger:
        ledger = session.ledger_path
        assert ledger.is_file() and ledger.parent == session.dir_path
        assert session._ledger is LEDGER_NAMES[ledger.name]  # one shared name, not a path
        assert session.has_ledger


async def test_a_session_made_by_hand_reads_back_what_it_was_given(tmp_path):
    elsewhere = tmp_path / "elsewhere" / "session.db"
    session = Session("a", "persistent", ledger_path=elsewhere, dir_path=tmp_path / "a")
    assert session.ledger_path == elsewhere and session.dir_path == tmp_path / "a"
    moved = Session("b", "ephemeral", ledger_path=tmp_path / "b" / "session.db.gz")
    moved.dir_path = tmp_path / "b"
    moved.dir_path = tmp_path / "c"  # a name in the old dir stays that file
    assert moved.ledger_path == tmp_path / "b" / "session.db.gz"
    for copy in (dataclasses.replace(session, name="n"), pickle.loads(pickle.dumps(session))):
        assert copy.ledger_path == elsewhere and copy.dir_path == tmp_path / "a"
    assert dataclasses.replace(session, name="n") != session
    assert pickle.loads(pickle.dumps(session)) == session


async def test_a_list_entry_is_a_place_in_columns_holding_its_inputs(capsem_home, built_cache):
    datasette = await make_datasette(capsem_home, built_cache)
    state = get_state(datasette)
    catalog, index = state.catalog.snapshot(), state.index.snapshot()
    built = state.session_table.rows(catalog, index)
    assert len(built.rows) == len(catalog.sessions)
    for entry in built.rows:
        session = entry.inputs[0]
        assert session is catalog.sessions[entry["id"]]
        assert entry.inputs[1] is index.held_for_session(session.id)
        assert not hasattr(entry, "__dict__")
    row = state.session_table.full_rows(built.rows[:1])[0]
    assert state.session_table.full_rows(built.rows[:1])[0] is row  # kept while inputs are


async def test_the_charts_of_a_list_being_prepared_say_they_are_partial(capsem_home, built_cache):
    datasette = await make_datasette(capsem_home, built_cache)
    state = get_state(datasette)
    state.session_table.build_in_request_up_to = 0  # every list counts as big here
    state.session_table.provisional_rows = 3
    total = len(state.catalog.sessions())
    charts = ("/-/capsem/charts/sessions.json", "/-/capsem/charts/usage.json")

    with state.session_table._lock:  # the thread building the whole list waits for this
        answers = [(await datasette.client.get(url)).json() for url in charts]
        page = (await datasette.client.get("/")).text
    sessions_chart, usage_chart = answers
    for answer in answers:
        assert answer["partial"] is True
        assert answer["covers"] == {"sessions": total, "shown": 3}
        assert f"newest 3 of {total:,} sessions" in answer["note"]
    assert sum(row["sessions"] for row in sessions_chart["rows"]) == 3  # what it covers
    assert "capsem-charts-partial" in page and f"newest 3 of {total:,} sessions" in page

    async def whole():
        found = (await datasette.client.get(charts[0])).json()
        return found if not found["partial"] else None

    found = await until(whole, "the charts of the whole list")
    assert found["note"] is None and found["covers"] is None
    listed = (await datasette.client.get("/-/capsem/sessions.json?_size=max")).json()
    dated = [row for row in listed["sessions"] if row["created_at"]]
    assert listed["partial"] is None and listed["filtered"] == len(listed["sessions"]) > 3
    assert sum(row["sessions"] for row in found["rows"]) == len(dated)
    assert "capsem-charts-partial" not in (await datasette.client.get("/")).text


async def test_a_first_scan_of_a_big_home_is_not_waited_for(capsem_home, cache_dir):
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})
    answers = []

    def ask(catalog, wait):
        thread = threading.Thread(target=lambda: answers.append(catalog.snapshot(wait=wait)))
        thread.start()
        thread.join(HANG / 4)  # bounds a hang only: a request that waits the whole wait out
        return not thread.is_alive()

    small, big = Catalog(settings), Catalog(settings)
    big._single.first_scan_wait_up_to_bytes = 0  # this main.db counts as big
    with big._single._lock:  # the first scan, under way in another thread
        assert ask(big, HANG)  # answered at once: the page says the home is being read
    assert answers.pop() is None
    small._single._lock.acquire()  # a small home's first scan is waited for, as before
    threading.Timer(0.2, small._single._lock.release).start()  # that scan ends
    assert ask(small, HANG)
    assert answers.pop() is not None
    assert len(big.snapshot().sessions) == len(small.snapshot().sessions) > 0


async def test_main_db_rows_are_kept_in_the_cache_and_read_back_whole(capsem_home, cache_dir):
    """A session holds its main.db row as an int (its place in a file of the cache dir); the
    row read back is main.db's, a rescan of unchanged rows keeps every session, and a session
    sent to another process carries its row itself."""
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})
    catalog = Catalog(settings)
    sessions = catalog.snapshot().sessions
    conn = readonly.open_readonly(catalog.main_db_path(), settings.cache_dir)
    try:
        cursor = conn.execute("SELECT * FROM sessions")
        names = [d[0] for d in cursor.description]
        stored = {str(row[0]): dict(zip(names, row, strict=True)) for row in cursor}
    finally:
        conn.close()
    held = [s for s in sessions.values() if s.in_main_db]
    assert held and len(held) == len(stored)
    for session in held:
        assert type(session._main) is int
        row = session.main_row
        assert isinstance(row, MainRow)
        assert {k: v for k, v in stored[session.short_id].items() if k in row} == dict(row)
        assert session.summary()["in_main_db"] is True
    assert catalog.refresh(force=True)  # read again: equal rows keep their places
    again = catalog.snapshot().sessions
    assert all(again[s.id] is s for s in held)
    copy = pickle.loads(pickle.dumps(held[0]))
    assert isinstance(copy._main, MainRow) and copy.main_row == held[0].main_row


async def test_packed_rows_read_back_every_value_as_it_was(tmp_path):
    """Hostile and repeated values: a pooled column past 255 distinct values, bytes, None,
    big and negative numbers, a lone surrogate; equal rows pack to equal bytes."""
    columns = {"id": 0, "kind": 1, "blob": 2, "n": 3}
    packer = RowPacker.for_layout(CompactRow, {**columns, "probe": 4})
    first = [(f"id{i}", "same", None, 1, "x") for i in range(10)]  # kind, blob, n pooled
    odd = [
        (f"id{i}", f"kind{i}", b"\x00\xff" * i, (-1) ** i * 2**70 + i, "\udc80" if i % 2 else 1.5)
        for i in range(600)
    ]
    packed = packer.pack(first + odd)
    assert [unpack_row(p)._values for p in packed] == first + odd
    assert packer.pack([tuple(list(odd[7]))]) == [packed[17]]  # equal rows, equal bytes
    store = RowFile.for_dir(tmp_path, "test rows")
    places = [store.put(p) for p in packed]
    assert [unpack_row(p)._values for p in places] == first + odd
    assert store.put(packed[3], places[3]) is places[3]  # the same row keeps its place
    assert store.put(packed[4], places[3]) != places[3]
    big = packer.pack([("big", "k", b"x" * 70_000, 0, 0)])[0]
    assert store.put(big) == big  # too long for a place: kept as bytes
    assert unpack_row(big)["blob"] == b"x" * 70_000


async def test_the_index_keeps_verdicts_packed_and_answers_them_whole(capsem_home, built_cache):
    datasette = await make_datasette(capsem_home, built_cache)
    index = get_state(datasette).index.snapshot()
    assert index.checks
    for session_id in list(index.checks)[:50]:
        assert type(index.checks.packed(session_id)) is int
        row = index.checks[session_id]
        assert row["session_id"] == session_id and row["verdict"] in (
            "ok",
            "warning",
            "error",
            "unreadable",
        )
        assert index.checks.get(session_id) == row


async def test_a_refresh_keeps_no_stats_per_ledger_and_still_sees_a_change(capsem_home, tmp_path):
    """Between refreshes the index keeps one number for the watch's stats (a key and two tuples
    per ledger cost ~20 MB at 30,000 ledgers), and that number still tells a changed ledger."""
    home = tmp_path / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(tmp_path / "cache")})
    service = IndexService(settings, Catalog(settings))
    service.refresh()
    snapshot, kept = service._watched
    assert isinstance(kept, int)  # not a dict of stats
    assert service.changed_since_refresh() is None
    session = next(
        s for s in snapshot.sessions.values() if s.ledger_path is not None and not s.problems
    )
    conn = sqlite3.connect(session.ledger_path)
    conn.execute("CREATE TABLE IF NOT EXISTS zz_touched (x)")
    conn.commit()
    conn.close()
    assert service.changed_since_refresh() is not None


def _copied_cache(built_cache: Path, tmp_path: Path) -> Path:
    """A copy of the module's built index, for a service that refreshes (writes) it."""
    cache = tmp_path / "cache"
    shutil.copytree(built_cache, cache)
    return cache


async def test_the_ledgers_figures_are_kept_packed_and_read_again_in_place(
    capsem_home, built_cache, tmp_path
):
    """Each ledger's figures are an int in the snapshot (its place in a file of the cache
    dir), a fork's row whole with its file totals, and so is each session's daily usage;
    reading the index again keeps every unchanged row's very object, and the unreadable
    ledgers are known without a row each."""
    settings = load_settings(
        {"capsem_home": str(capsem_home), "cache_dir": str(_copied_cache(built_cache, tmp_path))}
    )
    service = IndexService(settings, Catalog(settings))
    first = service.snapshot()
    held = {sid: dict.get(first.ledgers, sid) for sid in first.ledgers}
    assert held
    forks = {sid for sid, row in held.items() if isinstance(row, CompactRow)}
    for session_id, row in held.items():
        if session_id in forks:
            assert row["file_totals"] is not None
        else:
            assert type(row) is int
            assert first.ledgers[session_id]["session_id"] == session_id
        assert first.held_for_session(session_id) is row
    problems = {sid for sid, row in first.ledgers.items() if row.get("problem")}
    assert first.unreadable == problems and first.problems == len(problems)
    service._snapshot = again = service._load_snapshot()  # the whole index read again
    assert again.generation == first.generation + 1
    assert all(dict.get(again.ledgers, sid) is row for sid, row in held.items())
    assert again.ledgers == first.ledgers and again.unreadable == first.unreadable
    usage = dict(dict.items(first.daily_usage))  # each session's days: an int too
    assert usage and all(type(place) is int for place in usage.values())
    assert all(dict.get(again.daily_usage, sid) is place for sid, place in usage.items())
    some = next(iter(usage))
    assert again.days_of(some) == first.days_of(some) != []


async def test_a_refresh_keeps_nothing_per_session_and_watches_the_sessions_own_strings(
    capsem_home, built_cache, tmp_path
):
    """Between refreshes the service holds no collection of its own with an entry per session
    (the stored verdicts' keys were one: ~8 MB at 100,000 sessions), and the directories it
    watches are the sessions' own strings, not a `Path` each (~700 bytes)."""
    settings = load_settings(
        {"capsem_home": str(capsem_home), "cache_dir": str(_copied_cache(built_cache, tmp_path))}
    )
    service = IndexService(settings, Catalog(settings))
    service.snapshot()
    service.refresh()
    sessions = service.catalog.snapshot().sessions
    kept = {
        name: len(value)
        for name, value in vars(service).items()
        if isinstance(value, (dict, set, list)) and len(value) >= len(sessions) // 2
    }
    assert kept == {}
    dirs = service.watched_directories()
    assert dirs and all(type(folder) is str for folder in dirs)
    own = [s.dir_location for s in sessions.values() if s.dir_location is not None]
    assert own and set(own) <= dirs
    layout = {str(path) for path in service.catalog.layout_dirs()}
    mine = {id(folder) for folder in own}
    assert all(id(folder) in mine or folder in layout for folder in dirs)


async def test_a_ledger_location_is_its_path_as_a_string(capsem_home, cache_dir, tmp_path):
    """What the watch and the refresh stat and compare (no Path made) is the ledger's path."""
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})
    sessions = list(Catalog(settings).snapshot().sessions.values())
    assert any(s.ledger_location for s in sessions)
    for session in sessions:
        expected = None if session.ledger_path is None else str(session.ledger_path)
        assert session.ledger_location == expected
    odd = Session(
        "x", "ephemeral", dir_path=f"{tmp_path}//a/", ledger_path=f"{tmp_path}/a/session.db"
    )
    assert odd.ledger_location == str(odd.ledger_path) == f"{tmp_path}/a/session.db"
    here = Session("y", "ephemeral", dir_path=".", ledger_path="session.db")
    assert here.ledger_location == str(here.ledger_path) == "session.db"


async def test_the_first_refresh_after_a_start_waits_for_the_list(
    capsem_home, built_cache, tmp_path
):
    """A server's background thread reads the stored figures and builds the list (its
    listeners) before its first refresh, not beside it: the three at once made ~100 MB of
    temporary objects at 100,000 sessions, most of which stayed with the process."""
    cache = _copied_cache(built_cache, tmp_path)
    settings = load_settings(
        {"capsem_home": str(capsem_home), "cache_dir": str(cache), "index_refresh_seconds": 3600}
    )
    service = IndexService(settings, Catalog(settings))
    calls = []
    refreshed = threading.Event()

    def listener():
        calls.append(service.freshness()["last_refresh_at"])
        if calls[-1] is not None:
            refreshed.set()

    service.after_refresh.append(listener)
    service.start_background()
    try:
        assert refreshed.wait(HANG)
    finally:
        service.stop_background()
    assert calls[0] is None  # the list was built before any refresh
    assert calls[-1] is not None


async def test_the_periodic_refresh_reads_nothing_while_nothing_changed(
    capsem_home, built_cache, tmp_path
):
    """The full refresh every `index_refresh_seconds` is skipped while the watch sees no
    change and the index file is as this process left it; another writer of the file (a
    CLI refresh beside the server) makes it run again."""
    cache = _copied_cache(built_cache, tmp_path)
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache)})
    service = IndexService(settings, Catalog(settings))
    assert service.may_have_changed()  # nothing read yet
    service.refresh()
    assert service.changed_since_refresh() is None and not service.may_have_changed()
    IndexService(settings, Catalog(settings)).refresh()  # another process's refresh
    assert service.may_have_changed()
    service.refresh()
    assert not service.may_have_changed()
