"""The cross-session index: figures equal direct sums over every era, incremental refresh,
lookups, canned queries, the CLI, and the background refresh of a running server."""

from __future__ import annotations

import asyncio
import math
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.catalog import Catalog
from datasette_capsem.config import load_settings
from datasette_capsem.index import IndexService
from datasette_capsem.readonly import open_readonly
from datasette_capsem.state import get_state
from tests.helpers import make_datasette, session_in, sessions_in, snapshot_tree

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Direct sums, written here independently of the plugin's SQL (spec §3.5).
DIRECT_SUMS = {
    "requests": "SELECT COUNT(*) FROM net_events",
    "allowed_requests": "SELECT COUNT(*) FROM net_events WHERE decision = 'allowed'",
    "denied_requests": "SELECT COUNT(*) FROM net_events WHERE decision = 'denied'",
    "input_tokens": "SELECT COALESCE(SUM(input_tokens), 0) FROM model_calls",
    "output_tokens": "SELECT COALESCE(SUM(output_tokens), 0) FROM model_calls",
    "cost_usd": "SELECT COALESCE(SUM(estimated_cost_usd), 0) FROM model_calls",
    "model_calls": "SELECT COUNT(*) FROM model_calls",
    "tool_calls": "SELECT COUNT(*) FROM tool_calls",
    "file_events": "SELECT COUNT(*) FROM fs_events",
    "exec_events": "SELECT COUNT(*) FROM exec_events",
    "audit_events": "SELECT COUNT(*) FROM audit_events",
}


def readable(manifest: dict) -> list[dict]:
    return sessions_in(manifest, has=("ledger",), lacks=("broken",))


def direct_sums(ledger: Path, cache_dir: Path) -> dict[str, float | int | None]:
    """Figures read straight from a ledger (through the read-only opener, so no byte of the
    shared home changes); None where the file has no such table."""
    conn = open_readonly(ledger, cache_dir)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        sums = {}
        for figure, sql in DIRECT_SUMS.items():
            table = sql.split(" FROM ")[1].split()[0]
            sums[figure] = conn.execute(sql).fetchone()[0] if table in tables else None
        mcp = 0
        if "tool_calls" in tables:
            columns = {r[1] for r in conn.execute("PRAGMA table_info(tool_calls)")}
            if "origin" in columns:
                mcp += conn.execute(
                    "SELECT COUNT(*) FROM tool_calls WHERE origin='mcp'"
                ).fetchone()[0]
        if "mcp_calls" in tables:
            mcp += conn.execute("SELECT COUNT(*) FROM mcp_calls").fetchone()[0]
        sums["mcp_calls"] = mcp if {"tool_calls", "mcp_calls"} & tables else None
        return sums
    finally:
        conn.close()


def fork_parent(manifest: dict, fork: dict) -> dict:
    """The manifest session a fork names in `forked_from` (an id, else a display name)."""
    sessions = manifest["sessions"]
    by_id = [s for s in sessions if s["id"] == fork["forked_from"]]
    return (by_id or [s for s in sessions if s.get("name") == fork["forked_from"]])[0]


def _ledger_copy(ledger: Path, scratch: Path) -> sqlite3.Connection:
    """A private copy of a ledger (and its WAL), so plain sqlite3 can read it anywhere."""
    scratch.mkdir(parents=True, exist_ok=True)
    target = scratch / f"{ledger.parent.name}.db"
    shutil.copyfile(ledger, target)
    if Path(f"{ledger}-wal").exists():
        shutil.copyfile(f"{ledger}-wal", f"{target}-wal")
    return sqlite3.connect(target)


def own_sums(fork: Path, parent: Path) -> dict[str, float | int | None]:
    """direct_sums over the fork's own rows only: rows whose event_id is not in the parent's
    same table (computed here in Python, independently of the plugin's SQL)."""
    with tempfile.TemporaryDirectory() as scratch:
        fork_conn = _ledger_copy(fork, Path(scratch) / "fork")
        parent_conn = _ledger_copy(parent, Path(scratch) / "parent")
        try:
            return _own_sums(fork_conn, parent_conn)
        finally:
            fork_conn.close()
            parent_conn.close()


def _own_sums(fork: sqlite3.Connection, parent: sqlite3.Connection) -> dict:
    def rows(table: str, *columns: str) -> list[tuple]:
        inherited = {r[0] for r in parent.execute(f"SELECT event_id FROM {table}")}
        found = fork.execute(f"SELECT event_id, {', '.join(columns) or '1'} FROM {table}")
        return [r[1:] for r in found if r[0] is None or r[0] not in inherited]

    net = rows("net_events", "decision")
    calls = rows("model_calls", "input_tokens", "output_tokens", "estimated_cost_usd")
    tools = rows("tool_calls", "origin")
    return {
        "requests": len(net),
        "allowed_requests": sum(1 for (d,) in net if d == "allowed"),
        "denied_requests": sum(1 for (d,) in net if d == "denied"),
        "input_tokens": sum(c[0] or 0 for c in calls),
        "output_tokens": sum(c[1] or 0 for c in calls),
        "cost_usd": sum(c[2] or 0.0 for c in calls),
        "model_calls": len(calls),
        "tool_calls": len(tools),
        "mcp_calls": sum(1 for (o,) in tools if o == "mcp"),
        "file_events": len(rows("fs_events")),
        "exec_events": len(rows("exec_events")),
        "audit_events": len(rows("audit_events")),
    }


def distinct_files(manifest: dict, indexed: set[str] | None = None) -> list[dict]:
    """One manifest session per ledger file (an alias shares its owner's file): the readable
    ones, or those in `indexed` (a broken file root can still read, or one read from a
    snapshot, is indexed too)."""
    return sessions_in(
        manifest,
        has=("ledger",),
        lacks=("alias_of",),
        where=lambda s: s["id"] in indexed if indexed is not None else not s.get("broken"),
    )


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def copy_home(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def service_for(home: Path, cache_dir: Path) -> IndexService:
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache_dir)})
    return IndexService(settings, Catalog(settings))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("index-cache")


async def test_index_figures_equal_direct_sums_in_every_era(
    built_index, manifest, capsem_home, cache_dir
):
    snapshot = built_index.snapshot()
    ledgers = snapshot.ledgers
    eras = set()
    for session in readable(manifest):
        if session.get("alias_of"):  # one file, indexed once, under its current route id
            assert session["id"] not in ledgers
            assert snapshot.aliases[session["id"]] == session["alias_of"]
            assert snapshot.for_session(session["id"]) == ledgers[session["alias_of"]]
            continue
        row = ledgers[session["id"]]
        assert row["problem"] is None, (session["id"], row["problem"])
        whole = direct_sums(capsem_home / session["ledger"], cache_dir)
        expected = whole
        if session.get("forked_from"):
            parent = fork_parent(manifest, session)
            expected = own_sums(capsem_home / session["ledger"], capsem_home / parent["ledger"])
            assert row["inherited_from"] == parent["id"] and row["inherited_problem"] is None
            for figure, value in whole.items():
                if value is not None:
                    assert same(row["file_totals"][figure], value), (session["id"], figure)
        else:
            assert row.get("file_totals") is None and row["inherited_from"] is None
        for figure, value in expected.items():
            if value is not None:
                assert same(row[figure], value), (session["id"], session["era"], figure)
        eras.add(session["era"])
    assert {"head", "1.1", "0.16", "migrated"} <= eras


def expected_per_file(
    manifest: dict, home: Path, cache_dir: Path, indexed: set[str]
) -> dict[str, dict]:
    """Independent figures of every distinct ledger file, a fork's without its parent's rows."""
    found = {}
    for session in distinct_files(manifest, indexed):
        ledger = home / session["ledger"]
        if session.get("forked_from"):
            parent = home / fork_parent(manifest, session)["ledger"]
            found[session["id"]] = own_sums(ledger, parent)
        else:
            found[session["id"]] = direct_sums(ledger, cache_dir)
    return found


def legacy_mcp_rows(ledger: Path, cache_dir: Path) -> int:
    conn = open_readonly(ledger, cache_dir)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "mcp_calls" not in tables:
            return 0
        return conn.execute(
            "SELECT COUNT(*) FROM mcp_calls WHERE tool_name IS NOT NULL"
        ).fetchone()[0]
    finally:
        conn.close()


async def test_alias_and_fork_are_not_double_counted(built_index, manifest, capsem_home, cache_dir):
    alias = session_in(manifest, has=("alias_of",))
    fork = session_in(manifest, has=("forked_from",))
    parent = fork_parent(manifest, fork)
    assert alias["ledger"] == sample_ledger(manifest, alias["alias_of"])
    ledgers = built_index.snapshot().ledgers
    assert alias["id"] not in ledgers and alias["alias_of"] in ledgers
    assert alias["id"] in built_index.covered_sessions()  # search need not scan its file again

    indexed = {sid: row for sid, row in ledgers.items() if not row["problem"]}
    assert {s["id"] for s in distinct_files(manifest)} <= set(indexed)
    per_file = expected_per_file(manifest, capsem_home, cache_dir, set(indexed))
    assert set(indexed) == set(per_file)  # every indexed id is one distinct file
    for figure in (
        "requests",
        "model_calls",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "tool_calls",
        "file_events",
        "exec_events",
        "audit_events",
    ):
        want = sum(f[figure] or 0 for f in per_file.values())
        got = sum(row[figure] or 0 for row in indexed.values())
        assert same(got, want), figure
    # The fork holds its parent's rows: without them it has strictly fewer model calls.
    whole = direct_sums(capsem_home / fork["ledger"], cache_dir)
    assert 0 < per_file[fork["id"]]["model_calls"] < whole["model_calls"]
    assert ledgers[fork["id"]]["inherited_rows"] > 0

    index = sqlite3.connect(f"file:{built_index.path}?mode=ro", uri=True)
    try:
        shared = index.execute(
            "SELECT value FROM id_lookup WHERE id_kind = 'event_id'"
            " GROUP BY value HAVING COUNT(DISTINCT session_id) > 1"
        ).fetchall()
        calls = index.execute("SELECT SUM(calls) FROM model_usage").fetchone()[0]
        tool_rows = index.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0]
    finally:
        index.close()
    assert shared == []  # no event id is indexed under two sessions
    assert calls == sum(f["model_calls"] for f in per_file.values())
    legacy = sum(
        legacy_mcp_rows(capsem_home / s["ledger"], cache_dir)
        for s in distinct_files(manifest, set(indexed))
    )
    assert tool_rows == sum(f["tool_calls"] or 0 for f in per_file.values()) + legacy

    conn = open_readonly(capsem_home / parent["ledger"], cache_dir)
    try:
        copied = conn.execute("SELECT event_id FROM model_calls ORDER BY id LIMIT 1").fetchone()[0]
    finally:
        conn.close()
    hits = built_index.lookup(copied)
    owners = {h["session_id"] for h in hits if h["copied_from"] is None}
    copies = {(h["session_id"], h["copied_from"]) for h in hits if h["copied_from"]}
    assert owners == {parent["id"]}, hits  # the row is the parent's
    assert copies == {(fork["id"], parent["id"])}, hits  # the fork's file holds a copy of it


def sample_ledger(manifest: dict, session_id: str) -> str:
    return session_in(manifest, id=session_id)["ledger"]


async def test_index_queries_count_each_file_once(
    indexed_datasette, built_index, capsem_home, manifest, tmp_path
):
    datasette, service = indexed_datasette, built_index
    indexed = service.covered_sessions() & set(service.snapshot().ledgers)
    per_file = expected_per_file(manifest, capsem_home, tmp_path / "direct", indexed)

    async def rows(name: str, query: str = "") -> list[dict]:
        response = await datasette.client.get(f"/index/{name}.json?_shape=array&_size=max{query}")
        assert response.status_code == 200, (name, response.text[:300])
        return response.json()

    want_calls = sum(f["model_calls"] for f in per_file.values())
    want_tokens = sum(f["input_tokens"] for f in per_file.values())
    want_cost = sum(f["cost_usd"] for f in per_file.values())
    for name in ("tokens_cost_by_provider", "tokens_cost_by_day"):
        found = await rows(name, "&since=&until=" if name.endswith("day") else "")
        found = [r for r in found if r.get("row_kind") != "total"]
        assert sum(r["calls"] for r in found) == want_calls, name
        assert sum(r["input_tokens"] for r in found) == want_tokens, name
    # The canned query's last row is the total over every model, and the cost page agrees.
    by_model = await rows("tokens_cost_by_provider")
    assert [r["row_kind"] for r in by_model] == ["model"] * (len(by_model) - 1) + ["total"]
    total = by_model[-1]
    assert (total["calls"], total["input_tokens"]) == (want_calls, want_tokens)
    assert total["cost_usd"] == pytest.approx(want_cost, abs=1e-4)
    assert total["sessions"] == len({s for s, f in per_file.items() if f["model_calls"]})
    costs = (await datasette.client.get("/-/capsem/costs.json")).json()
    assert costs["total"] == total and costs["models"] == by_model[:-1]
    page = (await datasette.client.get("/-/capsem/costs")).text
    assert "Total, every model" in page and f"${total['cost_usd']:,.4f}" in page
    home = (await datasette.client.get("/")).text
    assert f"${total['cost_usd']:,.2f}</strong> recorded cost" in home
    assert 'href="/-/capsem/costs"' in home
    by_cost = await rows("sessions_by_cost")
    assert sum(r["cost_usd"] or 0 for r in by_cost) == pytest.approx(want_cost, abs=1e-4)
    alias = session_in(manifest, has=("alias_of",))
    fork = session_in(manifest, has=("forked_from",))
    assert alias["id"] not in {r["session_id"] for r in by_cost}
    fork_row = next(r for r in by_cost if r["session_id"] == fork["id"])
    assert fork_row["model_calls"] == per_file[fork["id"]]["model_calls"]
    assert fork_row["inherited_from"] == fork_parent(manifest, fork)["id"]
    # The home page's usage chart sums the same per-session figures.
    usage = (await datasette.client.get("/-/capsem/charts/usage.json?all=1")).json()["rows"]
    assert sum(u["input_tokens"] for u in usage) == want_tokens


async def test_a_fork_is_reread_only_when_its_parent_changes_identity(
    capsem_home, manifest, tmp_path
):
    home = copy_home(capsem_home, tmp_path / "home")
    service = service_for(home, tmp_path / "cache")
    service.refresh()
    fork = session_in(manifest, has=("forked_from",))
    parent = fork_parent(manifest, fork)
    before = dict(service.snapshot().ledgers[fork["id"]])

    writer = sqlite3.connect(home / parent["ledger"])  # the parent resumes and writes a call
    writer.execute(
        "INSERT INTO model_calls (timestamp, provider, model, method, path, input_tokens,"
        " output_tokens, estimated_cost_usd, event_id) VALUES ('2026-08-09T10:00:00.000000Z',"
        " 'anthropic', 'claude-x', 'POST', '/v1/messages', 700, 7, 0.25, 'abcdefabcdef')"
    )
    writer.commit()
    writer.close()
    grown = service.refresh()
    assert grown.indexed == [parent["id"]]  # new parent rows cannot be in the fork's copy
    assert service.snapshot().ledgers[fork["id"]]["input_tokens"] == before["input_tokens"]

    shutil.rmtree((home / parent["ledger"]).parent)  # the parent is deleted
    service.catalog.refresh(force=True)
    gone = service.refresh()
    assert fork["id"] in gone.indexed and parent["id"] in gone.removed
    after = service.snapshot().ledgers[fork["id"]]
    whole = direct_sums(home / fork["ledger"], tmp_path / "direct")
    assert after["inherited_from"] is None and after.get("file_totals") is None
    assert after["model_calls"] == whole["model_calls"]  # counted once, now for the fork
    assert service.refresh().indexed == []


async def test_a_fork_whose_parent_cannot_be_read_counts_its_whole_file_until_it_can(
    capsem_home, manifest, tmp_path
):
    home = copy_home(capsem_home, tmp_path / "home")
    fork = session_in(manifest, has=("forked_from",))
    parent = fork_parent(manifest, fork)
    parent_file = home / parent["ledger"]
    original = parent_file.read_bytes()
    parent_file.write_bytes(b"not a database" * 100)
    service = service_for(home, tmp_path / "cache")
    service.refresh()
    row = service.snapshot().ledgers[fork["id"]]
    whole = direct_sums(home / fork["ledger"], tmp_path / "direct")
    assert row["inherited_problem"] and row["model_calls"] == whole["model_calls"]
    assert service.refresh().indexed == []  # nothing changed: nothing re-read

    parent_file.write_bytes(original)
    healed = service.refresh()
    assert set(healed.indexed) == {parent["id"], fork["id"]}
    row = service.snapshot().ledgers[fork["id"]]
    assert row["inherited_problem"] is None and row["inherited_from"] == parent["id"]
    assert row["model_calls"] < whole["model_calls"]


async def test_broken_ledgers_are_recorded_with_their_problem(built_index, manifest):
    ledgers = built_index.snapshot().ledgers
    broken = sessions_in(
        manifest, where=lambda s: s.get("broken") in ("zero_bytes", "truncated", "not_sqlite")
    )
    assert broken
    for session in broken:
        assert session["broken"] in ledgers[session["id"]]["problem"]
        assert session["id"] not in built_index.covered_sessions()


async def test_lookup_finds_every_kind_of_identifier(built_index, manifest, capsem_home, cache_dir):
    session = next(s for s in readable(manifest) if s["era"] == "head" and s.get("clean"))
    conn = open_readonly(capsem_home / session["ledger"], cache_dir)
    try:
        probes = {
            "trace_id": conn.execute(
                "SELECT trace_id, 'model_calls' FROM model_calls WHERE trace_id IS NOT NULL LIMIT 1"
            ).fetchone(),
            "event_id": conn.execute(
                "SELECT event_id, 'fs_events' FROM fs_events LIMIT 1"
            ).fetchone(),
            "message_id": conn.execute(
                "SELECT message_id, 'model_calls' FROM model_calls WHERE message_id IS NOT NULL LIMIT 1"
            ).fetchone(),
            "call_id": conn.execute(
                "SELECT call_id, 'tool_calls' FROM tool_calls WHERE origin != 'mcp' LIMIT 1"
            ).fetchone(),
        }
    finally:
        conn.close()
    for kind, (value, table) in probes.items():
        hits = built_index.lookup(value)
        assert {"session_id": session["id"], "id_kind": kind, "table_name": table} in [
            {k: h[k] for k in ("session_id", "id_kind", "table_name")} for h in hits
        ], (kind, value, hits)
    assert built_index.lookup("no-such-identifier") == []
    assert built_index.lookup("000000000000") == []  # the migration placeholder is not an id


async def test_incremental_refresh_reads_only_changed_ledgers(capsem_home, manifest, tmp_path):
    home = copy_home(capsem_home, tmp_path / "home")
    service = service_for(home, tmp_path / "cache")
    first = service.refresh()
    assert len(first.indexed) == first.total > 10
    again = service.refresh()
    assert again.indexed == [] and again.unchanged == again.total

    session = next(s for s in readable(manifest) if s["era"] == "head" and s["kind"] == "ephemeral")
    before = service.snapshot().ledgers[session["id"]]
    writer = sqlite3.connect(home / session["ledger"])  # plays Capsem writing one more call
    writer.execute(
        "INSERT INTO model_calls (timestamp, provider, model, method, path, input_tokens,"
        " output_tokens, estimated_cost_usd, message_id) VALUES"
        " ('2026-08-02T10:00:00.000000Z', 'anthropic', 'claude-x', 'POST', '/v1/messages',"
        " 1000, 10, 0.5, 'msg_incremental_probe')"
    )
    writer.commit()
    writer.close()
    changed = service.refresh()
    assert changed.indexed == [
        session["id"]
    ]  # only the changed ledger is read (its time: benchmarks/)
    after = service.snapshot().ledgers[session["id"]]
    assert after["input_tokens"] == before["input_tokens"] + 1000
    assert same(after["cost_usd"], before["cost_usd"] + 0.5)
    assert service.lookup("msg_incremental_probe")[0]["session_id"] == session["id"]

    shutil.rmtree((home / session["ledger"]).parent)  # Capsem deletes a stopped session's dir
    service.catalog.refresh(force=True)
    gone = service.refresh()
    assert gone.removed == [session["id"]] and gone.indexed == []
    assert session["id"] not in service.snapshot().ledgers
    assert service.lookup("msg_incremental_probe") == []


async def test_the_index_lives_in_the_cache_and_the_home_is_untouched(capsem_home, tmp_path):
    before = snapshot_tree(capsem_home)
    service = service_for(capsem_home, tmp_path / "cache")
    service.refresh()
    assert service.path.is_relative_to(tmp_path / "cache")
    after = snapshot_tree(capsem_home)
    assert sorted(after) == sorted(before)
    assert all(name.endswith("-shm") for name in before if before[name] != after[name])


async def test_canned_queries_of_the_index_database(indexed_datasette, built_index):
    datasette, service = indexed_datasette, built_index
    by_day = await datasette.client.get("/index/tokens_cost_by_day.json?_shape=array&_size=max")
    assert by_day.status_code == 200
    ledgers = service.snapshot().ledgers.values()
    expected_tokens = sum(r["input_tokens"] or 0 for r in ledgers if not r["problem"])
    assert sum(r["input_tokens"] for r in by_day.json()) == expected_tokens
    for name in ("top_tools", "failing_domains", "tokens_cost_by_provider", "sessions_by_cost"):
        response = await datasette.client.get(f"/index/{name}.json?_shape=array")
        assert response.status_code == 200, (name, response.text[:300])
        assert response.json(), name
    tools = (await datasette.client.get("/index/top_tools.json?_shape=array")).json()
    timed = [t for t in tools if t["p50_ms"] is not None]
    assert timed and all(t["p50_ms"] <= t["p90_ms"] <= t["p99_ms"] <= t["max_ms"] for t in timed)
    domains = (await datasette.client.get("/index/failing_domains.json?_shape=array")).json()
    assert {"net", "dns"} <= {d["source"] for d in domains}
    event = service.lookup(next(iter(service.snapshot().ledgers)))  # a session id is no event id
    assert event == []


async def test_index_database_refuses_writes(capsem_home, tmp_path):
    datasette = await make_datasette(capsem_home, tmp_path / "cache", index_refresh_seconds=0)
    with pytest.raises(sqlite3.OperationalError):
        await datasette.databases["index"].execute_write("DELETE FROM ledgers")


async def test_server_refreshes_the_index_in_the_background(capsem_home, manifest, tmp_path):
    home = copy_home(capsem_home, tmp_path / "home")
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0.2)
    service = get_state(datasette).index
    session = next(s for s in readable(manifest) if s["era"] == "head" and s.get("clean"))
    deadline = time.time() + 30
    while session["id"] not in service.snapshot().ledgers and time.time() < deadline:
        await asyncio.sleep(0.05)
    assert service.freshness()["last_refresh_at"] is not None
    count = service.snapshot().ledgers[session["id"]]["file_events"]
    writer = sqlite3.connect(home / session["ledger"])
    writer.execute(
        "INSERT INTO fs_events (timestamp, action, path) VALUES ('2026-08-02T00:00:00Z', 'created', 'x')"
    )
    writer.commit()
    writer.close()
    # Wait for the new figure itself: a refresh that read the file while the writer was
    # finishing must read it again (readonly.settled), never publish a passing failure.
    while (
        service.snapshot().ledgers[session["id"]]["file_events"] != count + 1
        and time.time() < deadline
    ):
        assert service.snapshot().ledgers[session["id"]]["file_events"] is not None
        await asyncio.sleep(0.05)
    assert service.snapshot().ledgers[session["id"]]["file_events"] == count + 1
    freshness = (await datasette.client.get("/-/capsem/index.json")).json()
    assert freshness["ledgers_indexed"] >= len(readable(manifest))
    service.stop_background()


async def test_cli_index_builds_with_a_progress_bar(capsem_home, tmp_path):
    result = CliRunner().invoke(
        cli, ["capsem", "index", "--home", str(capsem_home), "--cache-dir", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    assert "Reading ledgers" in result.output
    assert "ledgers read" in result.output
    again = CliRunner().invoke(
        cli, ["capsem", "index", "--home", str(capsem_home), "--cache-dir", str(tmp_path / "c")]
    )
    assert again.output.strip().splitlines()[-1].startswith("0 ledgers read")
