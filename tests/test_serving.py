"""Serving a Capsem home: discovery of every layout, lazy mounting, read-only, broken inputs."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from datasette_capsem.mount import mounter
from datasette_capsem.mount.mounter import HOT_CONNECTIONS
from datasette_capsem.permissions import DATASETTE_1
from datasette_capsem.state import get_state
from tests.helpers import make_datasette, session_in, sessions_in, snapshot_tree

pytestmark = pytest.mark.asyncio(loop_scope="session")


def readable_sessions(manifest: dict) -> list[dict]:
    return sessions_in(manifest, has=("ledger",), lacks=("broken",))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_catalog_lists_every_session_of_the_manifest(capsem_home, manifest, cache_dir):
    datasette = await make_datasette(capsem_home, cache_dir)
    response = await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")
    assert response.status_code == 200
    listed = {s["id"] for s in response.json()["sessions"]}
    on_disk = sessions_in(manifest, where=lambda s: s.get("ledger") or s.get("main_db_row"))
    expected = {s["id"] for s in on_disk}
    assert expected <= listed


async def test_every_kind_and_era_is_served_as_a_datasette_database(
    capsem_home, manifest, cache_dir
):
    # As an operator who may see secrets: masking opens no file, and viewers are crawled by
    # test_security_hardening; this crawl is about what reading does to the home.
    datasette = await make_datasette(
        capsem_home, cache_dir, max_mounted_sessions=4, view_secrets=True
    )
    seen_kinds, seen_eras = set(), set()
    for session in readable_sessions(manifest):
        for table, count in sorted(session.get("counts", {}).items())[:3]:
            response = await datasette.client.get(
                f"/{session['id']}/{table}.json?_shape=array&_size=max&_col=id"
            )
            assert response.status_code == 200, (session["id"], table, response.text[:300])
            assert len(response.json()) == min(count, 1000), (session["id"], table)
        seen_kinds.add(session["kind"])
        seen_eras.add(session["era"])
    assert {"ephemeral", "persistent", "failed", "run", "legacy", "legacy_gz"} <= seen_kinds
    assert len(seen_eras) >= 4


async def test_sessions_are_mounted_lazily_and_evicted_beyond_the_bound(
    capsem_home, manifest, cache_dir
):
    datasette = await make_datasette(capsem_home, cache_dir, max_mounted_sessions=3)
    state = get_state(datasette)
    assert not state.mounter.mounted  # nothing attached until asked for
    sessions = readable_sessions(manifest)
    assert len(sessions) > 6
    for session in sessions:
        response = await datasette.client.get(f"/{session['id']}.json")
        assert response.status_code == 200
        assert len(state.mounter.mounted) <= 3
        ledgers = [
            n for n in datasette.databases if n not in ("_internal", "_memory", "main", "index")
        ]
        assert len(ledgers) <= 3
    assert state.mounter.evict_count >= len(sessions) - 3


async def test_mount_cycles_do_not_leak_file_descriptors(capsem_home, manifest, cache_dir):
    datasette = await make_datasette(capsem_home, cache_dir, max_mounted_sessions=2)
    sessions = readable_sessions(manifest)[:6]

    async def visit_all():
        for session in sessions:
            response = await datasette.client.get(f"/{session['id']}/model_calls.json")
            assert response.status_code in (200, 404)

    await visit_all()
    baseline = open_fds()
    for _ in range(10):
        await visit_all()
    assert open_fds() <= baseline + 4


async def test_evicted_database_closes_all_its_connections(capsem_home, manifest, cache_dir):
    datasette = await make_datasette(capsem_home, cache_dir, max_mounted_sessions=1)
    state = get_state(datasette)
    first, second = readable_sessions(manifest)[:2]
    await datasette.client.get(f"/{first['id']}.json")
    database = state.mounter.mounted[first["id"]]
    assert database.open_connection_count >= 1
    await datasette.client.get(f"/{second['id']}.json")
    assert first["id"] not in datasette.databases
    assert database.open_connection_count == 0


async def test_unknown_session_is_a_404_with_near_matches(capsem_home, manifest, cache_dir):
    datasette = await make_datasette(capsem_home, cache_dir)
    known = readable_sessions(manifest)[0]["id"]
    response = await datasette.client.get(f"/{known[:-2]}zz.json")
    assert response.status_code == 404
    body = response.json()
    assert body["error"] == "Unknown session"
    assert known in [s["id"] for s in body["suggestions"]]
    html = await datasette.client.get(f"/{known[:-2]}zz")
    assert html.status_code == 404 and known in html.text


@pytest.mark.parametrize(
    "path",
    [
        "/..%2F..%2Fetc%2Fpasswd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/~2E~2E~2Fetc",
        "/a%00b",
        "/" + "x" * 5000,
    ],
)
async def test_hostile_paths_get_a_4xx_and_open_nothing(capsem_home, cache_dir, path):
    datasette = await make_datasette(capsem_home, cache_dir)
    # Datasette first redirects %-encoded names to their ~-encoded form; follow it.
    response = await datasette.client.get(path, follow_redirects=True)
    assert 400 <= response.status_code < 500
    assert not get_state(datasette).mounter.mounted


async def test_session_without_ledger_says_so(capsem_home, manifest, cache_dir):
    datasette = await make_datasette(capsem_home, cache_dir)
    index_only = session_in(manifest, has=("main_db_row",), lacks=("ledger",))
    response = await datasette.client.get(f"/{index_only['id']}.json")
    assert response.status_code == 404
    assert "no session.db on disk" in response.json()["message"]


async def test_broken_files_each_get_a_clear_page_and_others_keep_working(
    capsem_home, manifest, cache_dir
):
    datasette = await make_datasette(capsem_home, cache_dir)
    broken = [b for b in manifest["broken_files"] if b.get("session") and b["path"].endswith(".db")]
    assert {"zero_bytes", "truncated", "not_sqlite"} <= {b["kind"] for b in broken}
    healthy = readable_sessions(manifest)[0]["id"]
    for problem in broken:
        response = await datasette.client.get(f"/{problem['session']}.json")
        if problem["kind"] == "wal_without_shm":
            # Readable from a snapshot copy in the cache: opening it in place would create -shm.
            assert response.status_code == 200
            assert get_state(datasette).mounter.mounted[problem["session"]].open_mode == "snapshot"
        elif problem["kind"] == "unreadable" and os.geteuid() == 0:
            assert response.status_code == 200  # chmod 000 does not stop root
        else:
            assert response.status_code == 422, (problem, response.text[:300])
            body = response.json()
            assert problem["kind"] in body["error"]
            assert body["path"].endswith(problem["path"]), body
        assert (await datasette.client.get(f"/{healthy}.json")).status_code == 200


CRAWL_PARTS = 4  # the crawl in parts, so both xdist workers share it


def crawl_paths(manifest: dict, part: int) -> list[str]:
    """Every page and JSON of every `CRAWL_PARTS`-th session from `part` (and, in part 0, the
    home-wide pages): the union of the parts is every session of the manifest."""
    paths = []
    if part == 0:
        paths += [
            "/",
            "/-/capsem",
            "/main",
            "/main/sessions.json",
            "/main/sessions.csv",
            "/-/capsem/index.json",
            "/-/capsem/charts/usage.json",
            "/-/capsem/charts/sessions.json",
            "/-/capsem/search?q=co-work-1",
        ]
    searched = False
    for session in manifest["sessions"][part::CRAWL_PARTS]:
        sid = session["id"]
        paths += [
            f"/{sid}",
            f"/{sid}.json",
            f"/-/capsem/sessions/{sid}",
            f"/-/capsem/sessions/{sid}.json",
            f"/-/capsem/sessions/{sid}/check.json",
            f"/-/capsem/resolve.json?name={sid}",
        ]
        for table in sorted(session.get("counts", {})):
            # Without Datasette's facet suggestions (a grouped count per column: reads, half of
            # the crawl's time); table pages with them are loaded by test_browser_core.
            paths += [f"/{sid}/{table}?_size=5&_nosuggest=1", f"/{sid}/{table}.csv?_size=5"]
        for trace in (session.get("traces") or [])[:2]:
            base = f"/-/capsem/sessions/{sid}/traces/{trace}"
            paths += [base, f"{base}/graph.json", f"{base}.otlp.json"]
            if not searched:
                # Without an index, one search reads every ledger of the home: once per part
                # reads them all (a search per trace read them all again, 93 times: 15 s).
                paths.append(f"/-/capsem/search.json?q={trace}")
                searched = True
    return paths


@pytest.mark.heavy
@pytest.mark.parametrize("part", range(CRAWL_PARTS))
async def test_crawl_changes_no_byte_of_the_capsem_home(capsem_home, manifest, cache_dir, part):
    """Every file is byte-identical afterwards; only an existing -shm may change (spec §4.7)."""
    before = snapshot_tree(capsem_home)
    # As an operator who may see secrets: masking opens no file, and viewers are crawled by
    # test_security_hardening; this crawl is about what reading does to the home.
    datasette = await make_datasette(
        capsem_home, cache_dir, max_mounted_sessions=4, view_secrets=True
    )
    databases = tuple(f"/{s['id']}" for s in manifest["sessions"])
    for path in crawl_paths(manifest, part):
        response = await datasette.client.get(path)
        assert response.status_code < 500, (path, response.text[:500])
        if path.endswith(".json") and path.startswith(databases):
            for query in (
                (response.json() or {}).get("queries", []) if response.status_code == 200 else []
            ):
                canned = await datasette.client.get(f"{path[:-5]}/{query['name']}.json")
                assert canned.status_code < 500, (path, query["name"])
    after = snapshot_tree(capsem_home)
    assert sorted(after) == sorted(before), "no file created or removed"
    changed = [name for name in before if before[name] != after[name]]
    assert all(name.endswith("-shm") for name in changed), changed


async def test_a_missing_home_serves_a_page_that_says_so(tmp_path):
    datasette = await make_datasette(tmp_path / "nowhere", tmp_path / "cache")
    response = await datasette.client.get("/")
    assert response.status_code == 200
    assert "No Capsem home" in response.text
    assert (await datasette.client.get("/main.json")).status_code == 404


async def test_a_new_writer_is_noticed_and_its_rows_are_read(manifest, tmp_path, private_home):
    """A finished ledger is read without creating files; when a writer reappears (a resumed
    persistent VM), the reader switches to WAL-aware reads and sees the new rows."""
    home = private_home
    session = next(
        s
        for s in readable_sessions(manifest)
        if s["kind"] == "ephemeral" and not s.get("live") and s.get("counts", {}).get("fs_events")
    )
    ledger = home / session["ledger"]
    datasette = await make_datasette(home, tmp_path / "cache")
    url = f"/{session['id']}/fs_events.json?_shape=array&_size=max&_col=id"
    assert len((await datasette.client.get(url)).json()) == session["counts"]["fs_events"]
    assert not Path(f"{ledger}-wal").exists()

    writer = sqlite3.connect(ledger)  # plays Capsem resuming the VM
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute(
        "INSERT INTO fs_events (timestamp, action, path) VALUES "
        "('2026-08-01T00:00:00.000000Z', 'created', 'new.txt')"
    )
    writer.commit()
    try:
        rows = (await datasette.client.get(url)).json()
        assert len(rows) == session["counts"]["fs_events"] + 1
    finally:
        writer.close()


async def test_a_base_url_prefix_is_honoured(capsem_home, manifest, tmp_path):
    """Behind a proxy at /capsem/, routing and lazy mounting see paths without the prefix."""
    datasette = await make_datasette(
        capsem_home, tmp_path / "cache", settings={"base_url": "/capsem/"}
    )
    session = readable_sessions(manifest)[0]["id"]
    # datasette.client adds base_url itself.
    for path in (
        "/",
        f"/{session}.json",
        f"/{session}/model_calls.json",
        "/main.json",
        f"/-/capsem/sessions/{session}.json",
    ):
        response = await datasette.client.get(path)
        assert response.status_code == 200, (path, response.text[:200])
    assert (await datasette.client.get("/nope.json")).status_code == 404
    # Every plugin URL the pages hand out (links, forms, chart sources) carries the prefix.
    for path in ("/", f"/-/capsem/sessions/{session}"):
        html = (await datasette.client.get(path)).text
        bare = re.findall(r"""(?:href|action|src|data-src)="(/-/capsem[^"]*)""", html)
        assert not bare, (path, bare)


async def test_cache_copies_are_replaced_not_accumulated(manifest, tmp_path, private_home):
    """A legacy .gz is decompressed once per version; a changed file replaces its old copy."""
    home = private_home
    legacy = session_in(manifest, kind="legacy_gz")
    cache = tmp_path / "cache"
    datasette = await make_datasette(home, cache)
    assert (await datasette.client.get(f"/{legacy['id']}.json")).status_code == 200
    copies = lambda: sorted(cache.rglob("gz/*/*/session.db"))  # noqa: E731
    assert len(copies()) == 1
    gz = home / legacy["ledger"]
    os.utime(gz, ns=(gz.stat().st_atime_ns, gz.stat().st_mtime_ns + 10**9))  # a new version
    assert (await datasette.client.get(f"/{legacy['id']}/model_calls.json")).status_code == 200
    assert len(copies()) == 1


async def test_a_session_db_appearing_in_a_known_dir_is_found(manifest, tmp_path, private_home):
    home = private_home
    datasette = await make_datasette(home, tmp_path / "cache")
    await datasette.client.get("/")  # the catalog has scanned
    donor = readable_sessions(manifest)[0]
    new_dir = home / "run" / "sessions" / "99999999-2222-4333-8444-555555555555"
    new_dir.mkdir()
    get_state(datasette).catalog.refresh(force=True)  # the empty dir is seen
    shutil.copy(home / donor["ledger"], new_dir / "session.db")  # then Capsem writes into it
    assert (await datasette.client.get(f"/{new_dir.name}.json")).status_code == 200


async def test_main_json_skips_facet_suggestions_but_answers_facets(datasette):
    """main.db's JSON leaves out Datasette's facet suggestions (a query per column on every
    request); facets asked for by name, and the HTML page's suggestions, remain."""
    plain = (await datasette.client.get("/main/sessions.json")).json()
    # (Datasette 1.0's JSON carries suggestions only when asked: `_extra=suggested_facets`.)
    assert plain.get("suggested_facets", []) == [] and plain["rows"]
    faceted = (await datasette.client.get("/main/sessions.json?_facet=status")).json()
    facets = faceted["facet_results"]
    assert facets.get("results", facets)["status"]["results"]  # 1.0 nests them in "results"
    page = await datasette.client.get("/main/sessions")
    assert page.status_code == 200 and "Suggested facets" in page.text
    if not DATASETTE_1:
        asked = (await datasette.client.get("/main/sessions.json?_nosuggest=")).json()
        assert asked["suggested_facets"]


async def test_an_evicted_session_is_remounted_with_the_same_answers(
    capsem_home, manifest, cache_dir
):
    """Beyond the bound, the first session visited is unmounted; asking for it again mounts it
    again transparently: same rows, same canned queries. Ledgers of one schema shape share one
    introspected schema; a file of another shape gets its own."""
    datasette = await make_datasette(capsem_home, cache_dir, max_mounted_sessions=2)
    state = get_state(datasette)
    sessions = [s for s in readable_sessions(manifest) if s.get("counts", {}).get("model_calls")]
    first = sessions[0]

    async def answers(session_id: str) -> tuple:
        rows = await datasette.client.get(f"/{session_id}/model_calls.json?_shape=array&_size=max")
        page = await datasette.client.get(f"/{session_id}.json")
        assert rows.status_code == page.status_code == 200
        return rows.json(), sorted(query["name"] for query in page.json()["queries"])

    before = await answers(first["id"])
    assert before[0] and before[1]  # rows and canned queries to compare
    schemas = {}
    for session in sessions[1:]:
        await answers(session["id"])
        schemas[session["id"]] = (session["era"], state.mounter.mounted[session["id"]]._schema)
    assert first["id"] not in state.mounter.mounted and first["id"] not in datasette.databases
    assert await answers(first["id"]) == before
    assert first["id"] in state.mounter.mounted
    pairs = [(a, b) for a in schemas.values() for b in schemas.values() if a is not b]
    assert any(schema_a is schema_b for (_, schema_a), (_, schema_b) in pairs)
    for (era_a, schema_a), (era_b, schema_b) in pairs:
        if schema_a.tables != schema_b.tables:
            assert schema_a is not schema_b, (era_a, era_b)


def sqlite_heap() -> int | None:
    """Bytes SQLite has allocated in this process (the library Python's sqlite3 uses)."""
    try:
        library = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    except OSError:
        return None
    library.sqlite3_memory_used.restype = ctypes.c_int64
    return library.sqlite3_memory_used()


async def test_a_cooled_ledger_frees_its_page_cache_and_answers_the_same(
    capsem_home, manifest, cache_dir
):
    """A mounted ledger that leaves the few used last frees its connection's page cache
    (mount/mounter.HOT_CONNECTIONS); it stays mounted and answers as before."""
    datasette = await make_datasette(capsem_home, cache_dir, max_mounted_sessions=32)
    state = get_state(datasette)
    sessions = [s for s in readable_sessions(manifest) if s.get("counts", {}).get("model_calls")]
    assert len(sessions) > HOT_CONNECTIONS + 1
    first = sessions[0]["id"]
    url = f"/{first}/model_calls.json?_shape=array&_size=max"
    before = (await datasette.client.get(url)).json()
    database = state.mounter.mounted[first]
    if sqlite_heap() is None:
        pytest.skip("SQLite's allocator is not reachable here")
    database._connection[1].execute("SELECT * FROM model_calls").fetchall()  # pages cached
    heap = sqlite_heap()
    database.shrink()
    assert sqlite_heap() < heap
    for session in sessions[1 : HOT_CONNECTIONS + 2]:
        assert (await datasette.client.get(f"/{session['id']}.json")).status_code == 200
    assert first in state.mounter.mounted  # still mounted, no longer among the hot ones
    assert list(state.mounter.mounted)[-HOT_CONNECTIONS - 1] != first
    assert (await datasette.client.get(url)).json() == before


async def test_only_the_ledgers_used_last_keep_a_connection(
    capsem_home, manifest, cache_dir, monkeypatch
):
    """A mounted ledger that leaves the CONNECTED_LEDGERS used last closes its connection (its
    prepared statements were most of SQLite's heap per ledger) but stays mounted; asked again,
    it opens a new one and answers as before. At most CONNECTED_LEDGERS stay connected."""
    if sqlite_heap() is None:
        pytest.skip("SQLite's allocator is not reachable here")
    datasette = await make_datasette(capsem_home, cache_dir, max_mounted_sessions=64)
    state = get_state(datasette)
    sessions = [s for s in readable_sessions(manifest) if s.get("counts", {}).get("model_calls")]
    # The real bound if the generated home has enough sessions, else a smaller one.
    connected = min(mounter.CONNECTED_LEDGERS, len(sessions) - 2)
    monkeypatch.setattr(mounter, "CONNECTED_LEDGERS", connected)
    assert connected > HOT_CONNECTIONS
    first = sessions[0]["id"]
    url = f"/{first}/model_calls.json?_shape=array&_size=max"
    before = (await datasette.client.get(url)).json()
    assert (await datasette.client.get(f"/{first}/model_calls")).status_code == 200
    database = state.mounter.mounted[first]
    assert database.open_connection_count == 1
    for session in sessions[1 : connected + 2]:
        page = await datasette.client.get(f"/{session['id']}/model_calls.json?_size=5")
        assert page.status_code == 200
    assert first in state.mounter.mounted and first in datasette.databases
    assert database.open_connection_count == 0
    open_now = sum(db.open_connection_count for db in state.mounter.mounted.values())
    assert open_now <= connected
    assert (await datasette.client.get(url)).json() == before
    assert state.mounter.mounted[first] is database and database.open_connection_count == 1
    with_statements = sqlite_heap()
    database.disconnect()
    assert sqlite_heap() < with_statements
    assert (await datasette.client.get(url)).json() == before
