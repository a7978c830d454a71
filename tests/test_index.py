"""The cross-session index: figures equal direct sums over every era, incremental refresh,
lookups, canned queries, the CLI, and the background refresh of a running server."""

from __future__ import annotations

import asyncio
import math
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.catalog import Catalog
from datasette_capsem.config import load_settings
from datasette_capsem.index import IndexService
from datasette_capsem.index.plugin import index_service
from datasette_capsem.mount.readonly import open_readonly
from datasette_capsem.state import get_state
from tests.helpers import make_datasette, snapshot_tree

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Direct sums, written here independently of the plugin's SQL (spec §3.5).
DIRECT_SUMS = {
    "requests": "SELECT COUNT(*) FROM net_events",
    "allowed_requests": "SELECT COUNT(*) FROM net_events WHERE decision = 'allowed'",
    "denied_requests": "SELECT COUNT(*) FROM net_events WHERE decision = 'denied'",
    "input_tokens": "SELECT COALESCE(SUM(input_tokens), 0) FROM model_calls",
    "output_tokens": "SELECT COALESCE(SUM(output_tokens), 0) FROM model_calls",
    "cost_usd": "SELECT COALESCE(SUM(estimated_cost_usd), 0) FROM model_calls",
    "tool_calls": "SELECT COUNT(*) FROM tool_calls",
    "file_events": "SELECT COUNT(*) FROM fs_events",
    "exec_events": "SELECT COUNT(*) FROM exec_events",
    "audit_events": "SELECT COUNT(*) FROM audit_events",
}


def readable(manifest: dict) -> list[dict]:
    return [s for s in manifest["sessions"] if s.get("ledger") and not s.get("broken")]


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


@pytest.fixture(scope="module")
def built(capsem_home, cache_dir) -> IndexService:
    service = service_for(capsem_home, cache_dir)
    service.refresh()
    return service


async def test_index_figures_equal_direct_sums_in_every_era(
    built, manifest, capsem_home, cache_dir
):
    ledgers = built.snapshot().ledgers
    eras = set()
    for session in readable(manifest):
        row = ledgers[session["id"]]
        assert row["problem"] is None, (session["id"], row["problem"])
        expected = direct_sums(capsem_home / session["ledger"], cache_dir)
        for figure, value in expected.items():
            if value is not None:
                assert same(row[figure], value), (session["id"], session["era"], figure)
        eras.add(session["era"])
    assert {"current", "v1_1", "march2026", "migrated"} <= eras


async def test_broken_ledgers_are_recorded_with_their_problem(built, manifest):
    ledgers = built.snapshot().ledgers
    broken = [
        s
        for s in manifest["sessions"]
        if s.get("broken") in ("zero_bytes", "truncated", "not_sqlite")
    ]
    assert broken
    for session in broken:
        assert session["broken"] in ledgers[session["id"]]["problem"]
        assert session["id"] not in built.covered_sessions()


async def test_lookup_finds_every_kind_of_identifier(built, manifest, capsem_home, cache_dir):
    session = next(s for s in readable(manifest) if s["era"] == "current" and s.get("clean"))
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
        hits = built.lookup(value)
        assert {"session_id": session["id"], "id_kind": kind, "table_name": table} in [
            {k: h[k] for k in ("session_id", "id_kind", "table_name")} for h in hits
        ], (kind, value, hits)
    assert built.lookup("no-such-identifier") == []
    assert built.lookup("000000000000") == []  # the migration placeholder is not an id


async def test_incremental_refresh_reads_only_changed_ledgers(capsem_home, manifest, tmp_path):
    home = copy_home(capsem_home, tmp_path / "home")
    service = service_for(home, tmp_path / "cache")
    first = service.refresh()
    assert len(first.indexed) == first.total > 10
    again = service.refresh()
    assert again.indexed == [] and again.unchanged == again.total

    session = next(
        s for s in readable(manifest) if s["era"] == "current" and s["kind"] == "ephemeral"
    )
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
    started = time.perf_counter()
    changed = service.refresh()
    assert time.perf_counter() - started < 1.0
    assert changed.indexed == [session["id"]]
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


async def test_canned_queries_of_the_index_database(capsem_home, manifest, tmp_path):
    datasette = await make_datasette(capsem_home, tmp_path / "cache", index_refresh_seconds=0)
    service = index_service(get_state(datasette))
    service.refresh()
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
    service = index_service(get_state(datasette))
    session = next(s for s in readable(manifest) if s["era"] == "current" and s.get("clean"))
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
    while (
        service.snapshot().ledgers[session["id"]]["file_events"] == count and time.time() < deadline
    ):
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
