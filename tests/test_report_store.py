"""The report store: the rule book's reports survive a restart, in the plugin's cache only.

Real homes, real Datasette instances over one cache dir; what is counted is how many reports
were computed (`ReportCache.runs`) and read back (`ReportCache.loaded`), never how long.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import pytest
import pytest_asyncio

from datasette_capsem.checks import SqlCheck, SqlVariant, hookimpl
from datasette_capsem.checks.cache import ROW_VERDICTS_JSON, STORE_DIRECTORY, rule_book_version
from datasette_capsem.checks.engine import all_checks, check_session
from datasette_capsem.checks.profiles import ROWS
from datasette_capsem.plugins import plugin_manager
from datasette_capsem.readonly import open_readonly
from datasette_capsem.state import get_state
from datasette_capsem.versioned_store import CachedEntry, StoreKey, VersionedStore
from tests.helpers import actor_cookies, make_datasette, session_in, sessions_in, snapshot_tree
from tests.trace_support import clean_current, defect_sessions, session_url, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")

TOKEN = "sk-ant-api03-" + "Zq8" * 30  # credential-shaped: masked for readers without secrets


@pytest.fixture(scope="module")
def home(capsem_home: Path, tmp_path_factory) -> Path:
    """A copy of the default home this module may change."""
    copy = tmp_path_factory.mktemp("report-store") / "home"
    shutil.copytree(capsem_home, copy, symlinks=True)
    return copy


def stored_files(cache: Path) -> list[Path]:
    return sorted(cache.rglob(f"{STORE_DIRECTORY}/*.json.z"))


async def instance(home: Path, cache: Path):
    return await make_datasette(home, cache, view_secrets={"id": "auditor"})


def reports(datasette):
    return get_state(datasette).reports


async def overview(datasette, session_id: str, actor: str | None = None) -> dict:
    cookies = actor_cookies(datasette, actor) if actor else None
    response = await datasette.client.get(session_url(session_id, ".json"), cookies=cookies)
    assert response.status_code == 200, response.text
    return response.json()["integrity"]


async def trace_findings(datasette, session_id: str, trace_id: str) -> list:
    response = await datasette.client.get(trace_url(session_id, trace_id, ".json"))
    assert response.status_code == 200, response.text
    return response.json()["graph"]["findings"]


def orphan_trace(home: Path, manifest: dict, cache: Path) -> tuple[str, str, int]:
    """(session id, trace id, row id) of an injected orphan tool response inside a trace."""
    for session, defect in defect_sessions(manifest, "orphan_tool_response"):
        conn = open_readonly(home / session["ledger"], cache)
        try:
            row = conn.execute(
                "SELECT trace_id FROM tool_responses WHERE id = ?", (defect["row_id"],)
            ).fetchone()
        finally:
            conn.close()
        if row and row[0]:
            return session["id"], row[0], defect["row_id"]
    raise AssertionError("the default home has no orphan tool response in a trace")


async def test_reports_are_computed_once_across_a_restart(home, manifest, tmp_path):
    cache = tmp_path / "cache"
    before = snapshot_tree(home)
    session_id, trace_id, _row = orphan_trace(home, manifest, tmp_path / "probe")
    first = await instance(home, cache)
    quick = await overview(first, session_id)
    findings = await trace_findings(first, session_id, trace_id)
    assert reports(first).runs == 2 and reports(first).loaded == 0  # quick + rows
    assert quick["cached"] is False and "orphan_tool_response" in {f["kind"] for f in findings}
    assert len(stored_files(cache)) == 2

    second = await instance(home, cache)  # a restarted server over the same cache
    again = await overview(second, session_id)
    assert await trace_findings(second, session_id, trace_id) == findings
    assert reports(second).runs == 0 and reports(second).loaded == 2
    assert again["cached"] is True and again["computed_at"] == quick["computed_at"]
    assert again["findings"] == quick["findings"] and again["verdict"] == quick["verdict"]
    await overview(second, session_id)
    assert reports(second).loaded == 2 and reports(second).hits == 1  # memory from then on
    assert snapshot_tree(home) == before  # nothing written in the Capsem home


async def test_row_verdicts_read_back_are_the_computed_ones(home, manifest, tmp_path):
    """Every row's verdicts, in order, survive the codec (on the home's injected defects)."""
    store = VersionedStore.in_cache(tmp_path, STORE_DIRECTORY)
    for session in {d["session"] for d in manifest["defects"]}:
        entry = session_in(manifest, id=session)
        if not entry.get("ledger") or entry.get("broken"):
            continue
        try:
            conn = open_readonly(home / entry["ledger"], tmp_path)
        except Exception:  # noqa: BLE001 - an unreadable injected file has no rows to judge
            continue
        try:
            verdicts = check_session(conn, profile=ROWS).row_verdicts()
        finally:
            conn.close()
        key = StoreKey(str(home / entry["ledger"]), ROWS, ROW_VERDICTS_JSON)
        assert store.save(key, CachedEntry(("v",), 1.0, verdicts), "book")
        loaded = store.load(key, ("v",), "book")
        assert loaded is not None and loaded.computed_at == 1.0
        assert list(loaded.report.rows().items()) == list(verdicts.rows().items())
        assert store.load(key, ("other",), "book") is None  # another file version
        assert store.load(key, ("v",), "other book") is None  # another rule book


async def test_the_index_refresh_stores_the_overviews_report(home, manifest, tmp_path):
    cache = tmp_path / "cache"
    session = clean_current(manifest)[1]
    indexed = await instance(home, cache)
    get_state(indexed).index.refresh()
    assert stored_files(cache), "the refresh stored no report"
    shown = await overview(indexed, session["id"])
    assert reports(indexed).runs == 0 and reports(indexed).loaded == 1 and shown["cached"]
    # The very report the overview computes itself (same sample, links, counts).
    fresh = await overview(await instance(home, tmp_path / "other-cache"), session["id"])
    assert fresh["cached"] is False
    for field in ("findings", "tables", "verdict", "problems", "era", "database", "session"):
        assert shown[field] == fresh[field], field


async def test_a_changed_or_replaced_ledger_is_checked_again(home, manifest, tmp_path):
    cache = tmp_path / "cache"
    session_id, trace_id, row_id = orphan_trace(home, manifest, tmp_path / "probe")
    entry = session_in(manifest, id=session_id)
    path = home / entry["ledger"]
    first = await instance(home, cache)
    quick = await overview(first, session_id)
    assert "bad_timestamp" not in {f["kind"] for f in quick["findings"]}
    await trace_findings(first, session_id, trace_id)
    original = path.read_bytes()

    conn = sqlite3.connect(path)
    try:  # a row the rule book flags, and the orphan response no longer an orphan
        conn.execute(
            "INSERT INTO net_events (timestamp, domain, decision) "
            "VALUES ('not a time', 'changed.example.com', 'allowed')"
        )
        conn.execute("DELETE FROM tool_responses WHERE id = ?", (row_id,))
        conn.commit()
    finally:
        conn.close()
    second = await instance(home, cache)
    changed = await overview(second, session_id)
    kinds = {f["kind"] for f in await trace_findings(second, session_id, trace_id)}
    assert reports(second).runs == 2 and reports(second).loaded == 0
    assert "bad_timestamp" in {f["kind"] for f in changed["findings"]}
    assert "orphan_tool_response" not in kinds

    replacement = path.with_name("replacement.db")  # the same bytes as before, a new file
    replacement.write_bytes(original)
    replacement.replace(path)
    third = await instance(home, cache)
    restored = await overview(third, session_id)
    assert "orphan_tool_response" in {
        f["kind"] for f in await trace_findings(third, session_id, trace_id)
    }
    assert reports(third).runs == 2 and reports(third).loaded == 0
    assert "bad_timestamp" not in {f["kind"] for f in restored["findings"]}


class FlagEverySession:
    """A plugin whose SQL check fires once per ledger (a rule book change)."""

    def __init__(self, sql: str):
        self.check = SqlCheck(
            id="plugin_flag",
            kind="plugin_flag",
            severity="warning",
            explanation="A plugin's rule.",
            variants=(SqlVariant(sql=sql),),
        )

    @hookimpl
    def capsem_checks(self):
        return [self.check]


async def test_a_rule_book_change_makes_stored_reports_stale(home, manifest, tmp_path):
    cache = tmp_path / "cache"
    session = clean_current(manifest)[0]
    before = await overview(await instance(home, cache), session["id"])
    assert "plugin_flag" not in {f["kind"] for f in before["findings"]}
    version = rule_book_version()
    plugin = FlagEverySession("SELECT 1 AS id")
    plugin_manager().register(plugin)
    try:
        assert rule_book_version() != version
        flagged = await instance(home, cache)
        shown = await overview(flagged, session["id"])
        assert reports(flagged).runs == 1 and reports(flagged).loaded == 0
        assert "plugin_flag" in {f["kind"] for f in shown["findings"]}
        # The same plugin with other SQL is another rule book, too.
        changed = rule_book_version([*all_checks()[:-1], FlagEverySession("SELECT 2 AS id").check])
        assert changed not in (version, rule_book_version())
    finally:
        plugin_manager().unregister(plugin)
    assert rule_book_version() == version
    after = await instance(home, cache)
    assert "plugin_flag" not in {
        f["kind"] for f in (await overview(after, session["id"]))["findings"]
    }
    assert reports(after).runs == 1


@pytest.mark.parametrize(
    "damage",
    [b"", b"not compressed at all", b"x\x9c\x03\x00\x00\x00\x00\x01", "zlib:[1, 2]", "body"],
)
async def test_a_corrupt_store_file_is_ignored_and_rewritten(home, manifest, tmp_path, damage):
    cache = tmp_path / "cache"
    session_id, trace_id, _row = orphan_trace(home, manifest, tmp_path / "probe")
    first = await instance(home, cache)
    quick = await overview(first, session_id)
    await trace_findings(first, session_id, trace_id)
    files = stored_files(cache)
    assert len(files) == 2
    for path in files:
        if damage == "body":  # a sound header over a damaged report
            header, _, body = path.read_bytes().partition(b"\n")
            path.write_bytes(header + b"\n" + body[: len(body) // 2])
        elif isinstance(damage, str):
            path.write_bytes(zlib.compress(damage.removeprefix("zlib:").encode()))
        else:
            path.write_bytes(damage)
    second = await instance(home, cache)
    shown = await overview(second, session_id)
    page = await second.client.get(trace_url(session_id, trace_id))
    assert page.status_code == 200
    assert shown["findings"] == quick["findings"]
    assert reports(second).runs == 2 and reports(second).loaded == 0
    third = await instance(home, cache)  # rewritten whole: read back by the next one
    await overview(third, session_id)
    await trace_findings(third, session_id, trace_id)
    assert reports(third).runs == 0 and reports(third).loaded == 2


async def test_two_instances_computing_at_once_share_a_sound_store(home, manifest, tmp_path):
    cache = tmp_path / "cache"
    sessions = [s["id"] for s in clean_current(manifest)[:4]]
    one, two = await instance(home, cache), await instance(home, cache)
    both = await asyncio.gather(*(overview(ds, sid) for sid in sessions for ds in (one, two)))
    assert all(shown["verdict"] for shown in both)
    third = await instance(home, cache)
    for sid, shown in zip(sessions, both[::2], strict=True):
        assert (await overview(third, sid))["findings"] == shown["findings"]
    assert reports(third).runs == 0 and reports(third).loaded == len(sessions)
    assert not list((cache).rglob(".tmp-*"))  # no temporary file left behind


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from datasette_capsem.versioned_store import CachedEntry, StoreKey, VersionedStore
    store, key = VersionedStore(Path(sys.argv[1])), StoreKey("/ledger", "quick")
    big = {"findings": [{"kind": "k", "details": {str(i): "x" * 200 for i in range(400)}}]}
    for n in range(int(sys.argv[2])):
        report = {**big, "writer": sys.argv[3], "n": n}
        assert store.save(key, CachedEntry(("v",), float(n), report), "book")
    """
)


async def test_two_processes_writing_one_report_never_leave_a_torn_file(tmp_path):
    store, key = VersionedStore(tmp_path / "reports"), StoreKey("/ledger", "quick")
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(store.directory), "150", name])
        for name in ("a", "b")
    ]
    seen, deadline = 0, time.monotonic() + 120  # the deadline only bounds a hang
    while any(w.poll() is None for w in writers) and time.monotonic() < deadline:
        loaded = store.load(key, ("v",), "book")
        if loaded is not None:
            seen += 1
            assert loaded.report["writer"] in ("a", "b") and len(loaded.report["findings"]) == 1
        elif seen:
            raise AssertionError("a reader saw a torn or missing file after a whole one")
        await asyncio.sleep(0)
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    assert store.load(key, ("v",), "book").report["n"] == 149
    assert [p.name for p in store.directory.iterdir()] == [key.filename]


async def test_live_sessions_are_not_stored(capsem_home, manifest, tmp_path):
    cache = tmp_path / "cache"
    datasette = await instance(capsem_home, cache)
    catalog = get_state(datasette).catalog
    live = sessions_in(manifest, has=("ledger",), where=lambda s: catalog.get(s["id"]).live)
    assert live
    for session in live:
        await overview(datasette, session["id"])
    assert reports(datasette).runs == len(live)
    assert stored_files(cache) == []
    assert all(not entry.timeless for entry in reports(datasette)._entries.values())


@pytest_asyncio.fixture(loop_scope="session")
async def secret_in_a_finding(home, manifest):
    """A session whose dangling security row names a credential-shaped event id."""
    session = clean_current(manifest)[2]
    conn = sqlite3.connect(home / session["ledger"])
    try:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute(
            "INSERT INTO security_rule_events (timestamp_unix_ms, event_id, event_type, "
            "rule_id, rule_action, rule_json, event_json) "
            "VALUES (1, ?, 'http.request', 'r', 'allow', '{}', '{}')",
            (TOKEN,),
        )
        conn.commit()
    finally:
        conn.close()
    return session["id"]


async def test_a_stored_report_is_masked_for_readers_without_secrets(
    home, secret_in_a_finding, tmp_path
):
    cache, session_id = tmp_path / "cache", secret_in_a_finding
    computed = await overview(await instance(home, cache), session_id, actor="auditor")
    assert TOKEN in str(computed["findings"])  # the report holds the value itself
    restarted = await instance(home, cache)
    for suffix, shows in ((".json", "[redacted:"), ("", "Security rule event pointing at")):
        page = await restarted.client.get(session_url(session_id, suffix))
        assert page.status_code == 200 and shows in page.text
        assert TOKEN not in page.text
    assert TOKEN in str((await overview(restarted, session_id, actor="auditor"))["findings"])
    assert reports(restarted).runs == 0 and reports(restarted).loaded == 1


async def test_prune_removes_reports_of_deleted_ledgers_and_leftovers(tmp_path):
    store = VersionedStore(tmp_path / "reports")
    kept_ledger, gone_ledger = tmp_path / "kept.db", tmp_path / "gone.db"
    kept_ledger.write_bytes(b"x")
    gone_ledger.write_bytes(b"x")
    kept, gone = StoreKey(str(kept_ledger), "quick"), StoreKey(str(gone_ledger), "rows")
    for key in (kept, gone):
        assert store.save(key, CachedEntry(("v",), 1.0, {"verdict": "ok"}), "book")
    gone_ledger.unlink()  # Capsem deleted a stopped ephemeral session's directory
    (store.directory / "0123.json.z").write_bytes(b"garbage")
    old_temporary, new_temporary = store.directory / ".tmp-old", store.directory / ".tmp-new"
    old_temporary.write_bytes(b"half")
    new_temporary.write_bytes(b"being written")
    os.utime(old_temporary, (time.time() - 7200, time.time() - 7200))
    assert store.prune() == 3
    assert sorted(p.name for p in store.directory.iterdir()) == sorted(
        [kept.filename, new_temporary.name]
    )
    assert store.load(kept, ("v",), "book").report == {"verdict": "ok"}
    assert VersionedStore(tmp_path / "never-made").prune() == 0
