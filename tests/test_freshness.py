"""A running server keeps list and search fresh by watching the home, not by its timer.

The background full refresh is set to an hour, so only the stat watch (index/service.py) can
bring a change in: a ledger that grew, a ledger replaced by another file (rename), a session
removed. Each change is checked on the pages users see, never on a stale answer; the
deadline only bounds a hang.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from datasette.app import Datasette

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog
from datasette_capsem.index import IndexService
from datasette_capsem.index import service as service_module
from datasette_capsem.index.notify import DirectoryNotifier
from datasette_capsem.mount.ledger_db import LedgerDatabase
from tests.helpers import make_datasette, sessions_in

pytestmark = pytest.mark.asyncio(loop_scope="session")

DEADLINE_SECONDS = 60  # bounds a hang only; the full refresh would take an hour


async def eventually(check: Callable[[], object]) -> None:
    """Poll an async check until it passes; its last failure if the deadline passes."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        try:
            await check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.05)


def add_file_event(ledger: Path, path: str) -> None:
    writer = sqlite3.connect(ledger)
    writer.execute(
        "INSERT INTO fs_events (timestamp, action, path) VALUES ('2026-08-02T00:00:00Z', 'created', ?)",
        (path,),
    )
    writer.commit()
    writer.close()


def an_event_id(ledger: Path) -> str:
    conn = sqlite3.connect(ledger)
    try:
        return conn.execute("SELECT event_id FROM net_events ORDER BY id LIMIT 1").fetchone()[0]
    finally:
        conn.close()


async def text_hits(datasette, word: str) -> set[str]:
    response = await datasette.client.get(f"/-/capsem/search.json?q={word}")
    assert response.status_code == 200
    return {hit["session_id"] for hit in response.json()["text"]["hits"]}


async def id_hits(datasette, value: str) -> set[str]:
    response = await datasette.client.get(f"/-/capsem/search.json?q={value}")
    assert response.status_code == 200
    return {hit["session_id"] for hit in response.json()["hits"]}


async def list_row(datasette, session_id: str) -> dict | None:
    response = await datasette.client.get(f"/-/capsem/sessions.json?q={session_id}&all=1")
    assert response.status_code == 200
    rows = [row for row in response.json()["sessions"] if row["id"] == session_id]
    return rows[0] if rows else None


async def test_list_and_search_follow_changes_without_the_timer(manifest, tmp_path, private_home):
    home = private_home
    current = sessions_in(manifest, era="head", has=("ledger", "clean"), lacks=("alias_of",))
    changed, replaced, removed, donor = current[:4]
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=3600)
    state_index = datasette._capsem_state.index
    try:

        async def indexed():
            for session in (changed, replaced, removed):
                row = await list_row(datasette, session["id"])
                assert row is not None and row["indexed"]

        await eventually(indexed)
        before = (await list_row(datasette, changed["id"]))["verdict"]

        # 1. A ledger that grew: its new row is searchable, its list row re-checked.
        add_file_event(home / changed["ledger"], "/work/freshmarkeralpha.txt")

        async def grew():
            assert changed["id"] in await text_hits(datasette, "freshmarkeralpha")
            assert (await list_row(datasette, changed["id"]))["verdict"] != before

        await eventually(grew)

        # 2. A ledger replaced by another file (written beside it, renamed over it): the old
        # file's ids are no longer found in that session, the new file's words are.
        old_event = an_event_id(home / replaced["ledger"])
        assert replaced["id"] in await id_hits(datasette, old_event)
        target = home / replaced["ledger"]
        spare = target.with_name("session.db.new")
        shutil.copyfile(home / donor["ledger"], spare)
        add_file_event(spare, "/work/freshmarkerbravo.txt")
        os.replace(spare, target)

        async def swapped():
            assert replaced["id"] in await text_hits(datasette, "freshmarkerbravo")
            assert replaced["id"] not in await id_hits(datasette, old_event)

        await eventually(swapped)

        # 3. A session removed from disk: its rows leave search, its list row its ledger.
        removed_event = an_event_id(home / removed["ledger"])
        assert removed["id"] in await id_hits(datasette, removed_event)
        shutil.rmtree((home / removed["ledger"]).parent)

        async def gone():
            assert removed["id"] not in await id_hits(datasette, removed_event)
            row = await list_row(datasette, removed["id"])
            assert row is None or not row["has_ledger"]

        await eventually(gone)
        assert state_index.freshness()["last_error"] is None
    finally:
        state_index.stop_background()
    # The refreshes above reloaded only the changed sessions' rows: the in-memory figures
    # equal what a fresh read of the whole index gives.
    kept = state_index.snapshot()
    fresh = IndexService(state_index.settings, Catalog(state_index.settings)).snapshot()
    assert kept.ledgers == fresh.ledgers
    assert kept.checks == fresh.checks
    assert kept.daily_usage == fresh.daily_usage


async def test_the_notifier_wakes_on_a_write_a_new_file_and_a_removed_dir(tmp_path):
    """Real inotify on real files: each change is an event; nothing changed is none."""
    watched, other = tmp_path / "session", tmp_path / "other"
    watched.mkdir()
    other.mkdir()
    ledger = watched / "session.db"
    writer = sqlite3.connect(ledger)
    writer.execute("CREATE TABLE fs_events (timestamp TEXT, action TEXT, path TEXT)")
    writer.commit()
    writer.close()
    notifier = DirectoryNotifier()
    try:
        assert notifier.active, "inotify is present on Linux"
        assert notifier.watch([watched, tmp_path / "missing"]) == 1
        assert notifier.watched == {watched}  # a missing dir is left to the stat rounds
        assert notifier.watch([watched]) == 0  # already watched: nothing added
        assert notifier.wait(0) is False
        add_file_event(ledger, "/work/a.txt")
        assert notifier.wait(DEADLINE_SECONDS) is True
        assert notifier.wait(0) is False  # the write's events were all read at once
        (other / "x").write_text("not watched")
        assert notifier.wait(0) is False
        (watched / "session.db-wal").write_bytes(b"")
        assert notifier.wait(DEADLINE_SECONDS) is True
        notifier.watch([other])  # exactly these now
        assert notifier.watched == {other}
        (watched / "later").write_text("no longer watched")
        assert notifier.wait(0) is False
        shutil.rmtree(other)
        assert notifier.wait(DEADLINE_SECONDS) is True
        assert notifier.watched == frozenset()  # the kernel dropped the removed dir's watch
        notifier.wake()  # another thread ends a wait: no change was seen
        assert notifier.wait(DEADLINE_SECONDS) is False
    finally:
        notifier.close()


async def test_a_change_is_seen_through_the_os_without_any_stat_round(
    manifest, tmp_path, monkeypatch, private_home
):
    """With the rounds of stats an hour apart, only the notifier can wake the watch: a ledger
    that grew and a session dir moved into the home both reach search and the list."""
    monkeypatch.setattr(service_module, "WATCH_SECONDS", 3600.0)
    monkeypatch.setattr(service_module, "WATCH_MAX_SECONDS", 3600.0)
    home = private_home
    current = sessions_in(manifest, era="head", has=("ledger", "clean"), lacks=("alias_of",))
    changed, donor = current[:2]
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=3600)
    state_index = datasette._capsem_state.index
    try:

        async def indexed():
            row = await list_row(datasette, changed["id"])
            assert row is not None and row["indexed"]

        await eventually(indexed)
        add_file_event(home / changed["ledger"], "/work/notifiedmarkeralpha.txt")

        async def grew():
            assert changed["id"] in await text_hits(datasette, "notifiedmarkeralpha")

        await eventually(grew)

        new_id = "99999999-8888-4777-8666-555555555555"
        staging = tmp_path / new_id
        staging.mkdir()
        shutil.copyfile(home / donor["ledger"], staging / "session.db")
        add_file_event(staging / "session.db", "/work/notifiedmarkerbravo.txt")
        os.replace(staging, home / "run" / "sessions" / new_id)

        async def arrived():
            assert new_id in await text_hits(datasette, "notifiedmarkerbravo")
            row = await list_row(datasette, new_id)
            assert row is not None and row["indexed"]

        await eventually(arrived)
        assert state_index.freshness()["last_error"] is None
    finally:
        state_index.stop_background()


def a_wal_without_shm(folder: Path) -> Path:
    """A WAL-mode ledger whose committed rows are only in its `-wal`, with no `-shm` beside
    it (what a writer killed mid-session leaves): readonly reads it from a snapshot copy."""
    live = folder / "live" / "session.db"
    live.parent.mkdir(parents=True)
    writer = sqlite3.connect(live)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE fs_events (id INTEGER PRIMARY KEY, path TEXT)")
    writer.executemany("INSERT INTO fs_events (path) VALUES (?)", [(f"f{i}",) for i in range(50)])
    writer.commit()
    ledger = folder / "left" / "session.db"
    ledger.parent.mkdir()
    for suffix in ("", "-wal"):
        shutil.copy(f"{live}{suffix}", f"{ledger}{suffix}")
    writer.close()
    return ledger


def the_writer_finishes_before_the_copy(monkeypatch) -> list[Path]:
    """Make the first snapshot copy of a run start only after a real writer checkpointed the
    WAL into the file and closed (SQLite then removes the -wal and -shm of its last
    connection): the moment between readonly's stat and its copy. Returns the interrupted
    paths."""
    copy_of_the_moment = readonly._snapshot_copy
    interrupted: list[Path] = []

    def writer_finishes_first(state, cache_dir):
        if not interrupted:
            interrupted.append(state.path)
            finishing = sqlite3.connect(state.path)  # recovers the WAL, then checkpoints it
            finishing.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finishing.close()
            assert not Path(f"{state.path}-wal").exists()
        return copy_of_the_moment(state, cache_dir)

    monkeypatch.setattr(readonly, "_snapshot_copy", writer_finishes_first)
    return interrupted


async def test_a_read_caught_while_the_writer_finishes_is_tried_again(tmp_path, monkeypatch):
    """Between readonly's stat of the file and its copy of the WAL, a writer checkpoints the
    WAL into the file and removes it (SQLite's own close). The first try cannot copy a WAL that
    is gone; the read must be tried again on the file as it is now, not fail as unreadable
    (the index would have recorded a ledger with no figures until its next change)."""
    ledger = a_wal_without_shm(tmp_path)
    interrupted = the_writer_finishes_before_the_copy(monkeypatch)
    conn = readonly.open_readonly(ledger, tmp_path / "cache")
    try:
        assert conn.execute("SELECT count(*) FROM fs_events").fetchone()[0] == 50
    finally:
        conn.close()
    assert interrupted == [ledger]


async def test_a_mounted_ledger_caught_while_the_writer_finishes_reads_again(tmp_path, monkeypatch):
    """The same moment on a mounted ledger: a page's query must read the file as it is now,
    not answer "unreadable" because the WAL it planned to copy was removed meanwhile."""
    ledger = a_wal_without_shm(tmp_path)
    database = LedgerDatabase(Datasette(), ledger, tmp_path / "cache")
    interrupted = the_writer_finishes_before_the_copy(monkeypatch)
    result = await database.execute("SELECT count(*) FROM fs_events")
    assert result.single_value() == 50
    assert interrupted == [ledger] and database.open_mode == "immutable"
    database.close()
