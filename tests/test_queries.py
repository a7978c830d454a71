"""Canned queries: offered by era, answering with known figures, never erroring on bad input.

Every expected figure is computed here independently (manifest totals, or plain per-table
reads in Python through the read-only opener), never with the plugin's own SQL files.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest

from datasette_capsem.checks import hookimpl
from datasette_capsem.generate import GenerateOptions, generate_home
from datasette_capsem.graph import trace_rows
from datasette_capsem.graph.exchanges import is_ambient
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.plugins import plugin_manager
from datasette_capsem.queries import QuerySpec, all_specs, canned_queries_for
from datasette_capsem.queries.spec import sql_parameters
from datasette_capsem.readonly import open_readonly
from tests.helpers import sessions_in

pytestmark = pytest.mark.asyncio(loop_scope="session")

SESSION_QUERIES_EVERY_ERA = {
    "trace_chain",
    "model_call",
    "token_totals",
    "net_decisions",
    "mcp_tool_usage",
    "file_actions",
    "tool_usage_stats",
    "failing_domains",
    "tool_calls_without_response",
    "orphan_tool_responses",
    "responses_before_calls",
}
SESSION_QUERIES_CURRENT_ONLY = {
    "turn_chain",
    "unledgered_mcp_calls",
    "orphan_model_items",
    "orphan_body_blobs",
}
TRACE_TABLES = (
    "net_events",
    "model_calls",
    "model_items",
    "tool_calls",
    "tool_responses",
    "event_body_blobs",
    "fs_events",
    "exec_events",
    "dns_events",
    "audit_events",
    "substitution_events",
    "security_rule_events",
    "security_decision_events",
    "security_ask_events",
    "mcp_calls",
    "snapshot_events",
)


def readable(manifest: dict) -> list[dict]:
    """Sessions with a ledger SQLite can open (not broken), one per file (no aliases)."""
    return sessions_in(manifest, has=("ledger",), lacks=("broken", "alias_of"))


def by_era(manifest: dict) -> dict[str, dict]:
    """One clean-or-not readable session of each schema era (the first in the manifest)."""
    found: dict[str, dict] = {}
    for session in readable(manifest):
        found.setdefault(session["era"], session)
    return found


def open_ledger(capsem_home: Path, session: dict, cache_dir: Path) -> sqlite3.Connection:
    return open_readonly(capsem_home / session["ledger"], cache_dir)


async def rows(datasette, path: str, **params) -> list[dict]:
    response = await datasette.client.get(path, params={**params, "_shape": "array"})
    assert response.status_code == 200, (path, response.text[:500])
    return response.json()


# -- the specs themselves ---------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_declared_params_match_the_sql():
    """Datasette shows exactly `params` as form fields, so they must be what the SQL binds."""
    for spec in all_specs():
        parts = " ".join(part.sql for part in spec.parts)
        text = (spec.sql + parts).replace("{key}", spec.key or "key")
        assert sql_parameters(text) == set(spec.params), spec.id


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_every_query_lives_in_sql_files_with_a_title_and_description():
    for spec in all_specs():
        assert spec.title and len(spec.description) > 40, spec.id
        assert set(spec.databases) <= {"session", "main", "index"}


async def test_each_era_gets_the_queries_that_make_sense(manifest, capsem_home, cache_dir):
    for era, session in by_era(manifest).items():
        conn = open_ledger(capsem_home, session, cache_dir)
        try:
            schema = read_schema(conn)
            offered = canned_queries_for(schema, "session")
            assert set(offered) >= SESSION_QUERIES_EVERY_ERA, era
            if era in ("head", "migrated", "1.3"):  # 1.3 has every column of HEAD
                assert set(offered) >= SESSION_QUERIES_CURRENT_ONLY
            else:
                assert not SESSION_QUERIES_CURRENT_ONLY & set(offered), era
            assert not set(offered) & set(schema.tables), "a query would shadow a table"
            for _name, query in offered.items():  # runs, with every parameter blank
                conn.execute(query["sql"], {p: "" for p in query["params"]}).fetchall()
        finally:
            conn.close()


async def database_queries(datasette, database: str) -> set[str]:
    """The queries a database page offers: 0.65's page lists them all; 1.0's lists the first
    five and says there are more (`queries_more`), all of them at `/<db>/-/queries.json`."""
    data = (await datasette.client.get(f"/{database}.json")).json()
    names = {query["name"] for query in data["queries"]}
    more = {"_size": "100"} if data.get("queries_more") else None
    while more:
        listing = (await datasette.client.get(f"/{database}/-/queries.json", params=more)).json()
        names |= {query["name"] for query in listing["queries"]}
        more = {"_size": "100", "_next": listing["next"]} if listing["next"] else None
    return names


async def test_queries_on_the_database_pages(datasette, manifest):
    for era, session in by_era(manifest).items():
        assert await database_queries(datasette, session["id"]) >= SESSION_QUERIES_EVERY_ERA, era
    main = await database_queries(datasette, "main")
    assert {"session_list", "daily_totals"} <= main
    assert "trace_chain" not in main


async def test_a_query_an_era_lacks_is_a_404_not_an_sql_error(datasette, manifest):
    old = by_era(manifest)["0.16"]
    response = await datasette.client.get(f"/{old['id']}/unledgered_mcp_calls.json")
    assert response.status_code == 404


# -- known answers ----------------------------------------------------------------------------


async def test_token_totals_equal_manifest_totals_in_every_era(datasette, manifest):
    for session in readable(manifest):
        found = await rows(datasette, f"/{session['id']}/token_totals.json")
        totals = session["totals"]
        assert sum(r["input_tokens"] for r in found) == totals["input_tokens"], session["id"]
        assert sum(r["output_tokens"] for r in found) == totals["output_tokens"]
        assert math.isclose(sum(r["cost_usd"] for r in found), totals["cost"], abs_tol=1e-6)
        assert sum(r["calls"] for r in found) == session["counts"].get("model_calls", 0)


async def test_token_totals_read_usage_details(datasette, manifest, capsem_home, cache_dir):
    session = by_era(manifest)["head"]
    conn = open_ledger(capsem_home, session, cache_dir)
    try:
        import json

        cache = thinking = 0
        for (details,) in conn.execute("SELECT usage_details FROM model_calls"):
            parsed = json.loads(details) if details else {}
            cache += parsed.get("cache_read", 0)
            thinking += parsed.get("thinking", 0)
    finally:
        conn.close()
    found = await rows(datasette, f"/{session['id']}/token_totals.json")
    assert sum(r["cache_read_tokens"] for r in found) == cache
    assert sum(r["thinking_tokens"] for r in found) == thinking
    old = by_era(manifest)["0.16"]
    assert all(
        "cache_read_tokens" in r for r in await rows(datasette, f"/{old['id']}/token_totals.json")
    )


def time_key(text: str) -> tuple[str, str]:
    """RFC 3339 UTC text as (second, nanoseconds) so 3, 6 and 9 fractional digits compare."""
    second, _, fraction = text.rstrip("Z").partition(".")
    return second, fraction.ljust(9, "0")


CHILD_TABLES = ("tool_calls", "tool_responses", "model_items")
JOINED_TABLES = (
    "security_rule_events",
    "security_decision_events",
    "security_ask_events",
    "event_body_blobs",
)
# Tables whose rows carry their own event id, which security rows and body blobs join to.
PRIMARY_TABLES = (
    "model_calls",
    "tool_calls",
    "model_items",
    "net_events",
    "dns_events",
    "fs_events",
    "exec_events",
    "audit_events",
    "substitution_events",
    "mcp_calls",
)


def chain_rows_in_python(conn: sqlite3.Connection, column: str, value: str) -> set[tuple]:
    """Every (table, id) of the chain, table by table, the way spec §6.1 joins rows:

    rows whose `column` is `value`; tool calls, tool responses and model items owned by one of
    those model calls (files before 1.1 have no trace_id on them); security rows and body blobs
    whose event_id names one of those rows of a primary table (not the migration placeholder).
    """
    schema = read_schema(conn)
    found = set()
    for table in TRACE_TABLES:
        if schema.has(table, column):
            ids = conn.execute(f"SELECT id FROM {table} WHERE {column} = ?", [value])
            found |= {(table, row[0]) for row in ids}
    calls = [row_id for table, row_id in found if table == "model_calls"]
    for table in CHILD_TABLES:
        if schema.has(table, "model_call_id"):
            for call in calls:
                ids = conn.execute(f"SELECT id FROM {table} WHERE model_call_id = ?", [call])
                found |= {(table, row[0]) for row in ids}
    event_ids = set()
    for table, row_id in found:
        if table in PRIMARY_TABLES and schema.has(table, "event_id"):
            row = conn.execute(f"SELECT event_id FROM {table} WHERE id = ?", [row_id]).fetchone()
            event_ids.add(row[0])
    event_ids = {
        e
        for e in event_ids
        if isinstance(e, str) and re.fullmatch("[0-9a-f]{12}", e) and e != "000000000000"
    }
    for table in JOINED_TABLES:
        if schema.has(table, "event_id"):
            for event_id in event_ids:
                ids = conn.execute(f"SELECT id FROM {table} WHERE event_id = ?", [event_id])
                found |= {(table, row[0]) for row in ids}
    return found


async def test_trace_chain_holds_every_row_of_the_trace_in_time_order(
    datasette, manifest, capsem_home, cache_dir
):
    for era, session in by_era(manifest).items():
        conn = open_ledger(capsem_home, session, cache_dir)
        try:
            for trace in session["traces"]:
                chain = await rows(datasette, f"/{session['id']}/trace_chain.json", trace_id=trace)
                expected = chain_rows_in_python(conn, "trace_id", trace)
                assert {(r["table_name"], r["row_id"]) for r in chain} == expected, (era, trace)
                assert len(chain) == len(expected)
                times = [r["time"] for r in chain]
                assert times == sorted(times, key=time_key), era
                assert all(r["summary"] for r in chain)
                calls = Counter(r["table_name"] for r in chain)["model_calls"]
                if not is_ambient(trace):  # a turn; the ambient trace holds every exchange
                    assert calls == 3 or not session["clean"], (era, trace)
                    assert {r["lane"] for r in chain} == {"turn"}
                else:
                    assert {r["lane"] for r in chain} <= {"exchange", "ambient"}
        finally:
            conn.close()


async def test_turn_chain_matches_the_trace_outside_security_tables(
    datasette, manifest, capsem_home, cache_dir
):
    session = by_era(manifest)["head"]
    conn = open_ledger(capsem_home, session, cache_dir)
    try:
        for trace in session["traces"]:
            turn = await rows(datasette, f"/{session['id']}/turn_chain.json", turn_id=trace)
            chain = await rows(datasette, f"/{session['id']}/trace_chain.json", trace_id=trace)
            outside = {
                (r["table_name"], r["row_id"])
                for r in chain
                if not r["table_name"].startswith("security_")
            }
            found = {(r["table_name"], r["row_id"]) for r in turn}
            assert {f for f in found if not f[0].startswith("security_")} == outside
            assert found == chain_rows_in_python(conn, "turn_id", trace)
            assert any(t == "security_decision_events" for t, _ in found), trace
    finally:
        conn.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_trace_chain_reads_the_tables_the_trace_page_reads():
    """The chain's arms and the page's table lists (graph/trace_rows.py) must not drift."""

    spec = next(s for s in all_specs() if s.id == "trace_chain")
    arms = {part.aliases["t"] for part in spec.parts}
    page = {"model_calls", "tool_calls", "tool_responses", "model_items", "event_body_blobs"}
    page |= set(trace_rows.TRACE_TABLES) | set(trace_rows.SECURITY_TABLES)
    # snapshot_events (trace_id on 2026-05-10..06-11 files) is in the chain, not on the page.
    assert arms == page | {"snapshot_events"}
    by_event = [part for part in spec.parts if "FROM chain AS c" in part.sql]
    assert {part.aliases["t"] for part in by_event} == {
        *trace_rows.SECURITY_TABLES,
        "event_body_blobs",
    }
    for part in by_event:  # joined through the same primary tables as the page
        listed = re.search(r"c\.table_name IN \(([^)]*)\)", part.sql).group(1)
        assert set(re.findall(r"'(\w+)'", listed)) == set(trace_rows.PRIMARY_TABLES)
    assert spec.parts[-len(by_event) :] == tuple(by_event), "recursive arms come last"


def page_rows(graph: dict) -> set[tuple]:
    """(table, row id) of every ledger row drawn on a trace page (not a missing target)."""
    return {
        (node["table"], node["row_id"])
        for node in graph["nodes"]
        if node.get("table") and not node.get("missing") and not node.get("external")
    }


@pytest.mark.parametrize("era", ["head", "migrated", "0.16", "1.1"])
async def test_trace_chain_holds_the_rows_the_trace_page_shows(datasette, manifest, era):
    """The canned query and the trace page agree on what a trace is, in every era: on 0.16
    files tool rows join by model_call_id, security rows by event_id in every era."""
    sessions = [s for s in readable(manifest) if s["era"] == era and s.get("traces")]
    assert sessions, era
    for session in sessions[:3]:
        tables: set[str] = set()
        for trace in session["traces"]:
            page = await datasette.client.get(
                f"/-/capsem/sessions/{quote(session['id'], safe='')}/traces/"
                f"{quote(trace, safe='')}/graph.json"
            )
            assert page.status_code == 200, (session["id"], trace)
            chain = await rows(datasette, f"/{session['id']}/trace_chain.json", trace_id=trace)
            found = [(r["table_name"], r["row_id"]) for r in chain]
            assert len(found) == len(set(found)), "a row is listed once"
            assert set(found) == page_rows(page.json()), (era, session["id"], trace)
            tables |= {table for table, _ in found}
        if era == "0.16":  # no trace_id on tool rows: joined through their model call
            assert {"tool_calls", "tool_responses"} <= tables, session["id"]
        if era in ("head", "migrated"):  # decision rows carry no trace_id
            assert "security_decision_events" in tables, session["id"]


async def test_model_call_lists_its_items_tool_calls_and_responses(
    datasette, manifest, capsem_home, cache_dir
):
    session = by_era(manifest)["head"]
    conn = open_ledger(capsem_home, session, cache_dir)
    try:
        mc_id, trace = conn.execute(
            "SELECT model_call_id, trace_id FROM tool_calls WHERE model_call_id IS NOT NULL "
            "ORDER BY id LIMIT 1"
        ).fetchone()
        items = conn.execute(
            "SELECT COUNT(*) FROM model_items WHERE model_call_id = ?", [mc_id]
        ).fetchone()[0]
        call_ids = [
            r[0]
            for r in conn.execute("SELECT call_id FROM tool_calls WHERE model_call_id = ?", [mc_id])
        ]
        answers = conn.execute(
            f"SELECT COUNT(*) FROM tool_responses WHERE trace_id = ? AND call_id IN "
            f"({','.join('?' * len(call_ids))})",
            [trace, *call_ids],
        ).fetchone()[0]
        carried = conn.execute(
            "SELECT COUNT(*) FROM tool_responses WHERE model_call_id = ?", [mc_id]
        ).fetchone()[0]
    finally:
        conn.close()
    found = Counter(
        r["role"]
        for r in await rows(datasette, f"/{session['id']}/model_call.json", model_call_id=mc_id)
    )
    assert (
        found
        == Counter(
            {
                "call": 1,
                "item": items,
                "emitted tool call": len(call_ids),
                "response that came back": answers,
                "response carried in this request": carried,
            }
        )
        - Counter()
    )


def nearest_rank(values: list[int], p: int) -> int:
    """The documented definition: the value at rank ceil(p * n / 100) of the sorted values."""
    ordered = sorted(values)
    return ordered[math.ceil(p * len(ordered) / 100) - 1]


async def test_tool_usage_percentiles_equal_python_nearest_rank(
    datasette, manifest, capsem_home, cache_dir
):
    checked = 0
    for session in readable(manifest):
        if session["era"] not in ("head", "migrated"):
            continue
        conn = open_ledger(capsem_home, session, cache_dir)
        try:
            durations: dict[tuple, list[int]] = {}
            calls: Counter = Counter()
            for name, origin, ms in conn.execute(
                "SELECT tool_name, origin, duration_ms FROM tool_calls"
            ):
                calls[(name, origin)] += 1
                durations.setdefault((name, origin), [])
                if ms is not None:
                    durations[(name, origin)].append(ms)
        finally:
            conn.close()
        found = await rows(datasette, f"/{session['id']}/tool_usage_stats.json")
        assert {(r["tool_name"], r["origin"]) for r in found} == set(durations)
        for r in found:
            values = durations[(r["tool_name"], r["origin"])]
            assert r["calls"] == calls[(r["tool_name"], r["origin"])]
            assert r["ok"] + r["errors"] == r["calls"]
            for p in (50, 90, 95, 99):
                assert r[f"p{p}_ms"] == (nearest_rank(values, p) if values else None)
            checked += 1
    assert checked > 20


async def test_old_eras_count_tool_usage_without_latency(datasette, manifest):
    old = by_era(manifest)["0.16"]
    found = await rows(datasette, f"/{old['id']}/tool_usage_stats.json")
    assert sum(r["calls"] for r in found) == old["counts"]["tool_calls"]
    assert all(r["p50_ms"] is None for r in found)


async def test_mcp_usage_reads_mcp_calls_tool_calls_or_both(
    datasette, manifest, capsem_home, cache_dir
):
    for era, session in by_era(manifest).items():
        conn = open_ledger(capsem_home, session, cache_dir)
        try:
            schema = read_schema(conn)
            expected = 0
            if "mcp_calls" in schema.tables:
                expected += conn.execute(
                    "SELECT COUNT(*) FROM mcp_calls WHERE method = 'tools/call'"
                ).fetchone()[0]
            if schema.has("tool_calls", "server_name"):
                expected += conn.execute(
                    "SELECT COUNT(*) FROM tool_calls WHERE origin = 'mcp'"
                ).fetchone()[0]
        finally:
            conn.close()
        found = await rows(datasette, f"/{session['id']}/mcp_tool_usage.json")
        assert sum(r["calls"] for r in found) == expected > 0, era
        assert all(r["ok"] + r["denied"] + r["errors"] == r["calls"] for r in found)
    migrated = await rows(datasette, f"/{by_era(manifest)['migrated']['id']}/mcp_tool_usage.json")
    assert {s for r in migrated for s in r["source"].split(",")} == {"mcp_calls", "tool_calls"}


async def test_net_file_and_failure_figures(datasette, manifest, capsem_home, cache_dir):
    for era, session in by_era(manifest).items():
        counts = session["counts"]
        decisions = await rows(datasette, f"/{session['id']}/net_decisions.json")
        assert sum(r["requests"] for r in decisions) == counts["net_events"], era
        files = await rows(datasette, f"/{session['id']}/file_actions.json")
        assert sum(r["events"] for r in files) == counts["fs_events"], era
        conn = open_ledger(capsem_home, session, cache_dir)
        try:
            failing_net = Counter(
                r[0].lower()
                for r in conn.execute(
                    "SELECT domain FROM net_events WHERE decision != 'allowed' OR status_code >= 400"
                )
            )
            failing_dns: Counter = Counter()
            if "dns_events" in read_schema(conn).tables:
                failing_dns = Counter(
                    r[0].lower().rstrip(".")
                    for r in conn.execute(
                        "SELECT qname FROM dns_events WHERE decision != 'allowed' OR rcode != 0"
                    )
                )
        finally:
            conn.close()
        found = await rows(datasette, f"/{session['id']}/failing_domains.json")
        assert {r["domain"]: r["failures"] for r in found} == dict(failing_net + failing_dns)


async def test_orphan_queries_list_the_manifest_defects(datasette, manifest):
    query_for = {
        "tool_call_without_response": "tool_calls_without_response",
        "orphan_tool_response": "orphan_tool_responses",
        "response_before_call": "responses_before_calls",
        "unledgered_mcp_call": "unledgered_mcp_calls",
        "orphan_model_item": "orphan_model_items",
        "orphan_body_blob": "orphan_body_blobs",
    }
    for kind, query in query_for.items():
        defects = [d for d in manifest["defects"] if d["kind"] == kind]
        assert defects, kind
        for session_id in {d["session"] for d in defects}:
            want = {d["row_id"] for d in defects if d["session"] == session_id}
            found = await rows(datasette, f"/{session_id}/{query}.json")
            assert {r["id"] for r in found} == want, kind


# -- main.db ----------------------------------------------------------------------------------


def main_rows(capsem_home: Path, cache_dir: Path) -> list[dict]:
    conn = open_readonly(capsem_home / "sessions" / "main.db", cache_dir)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM sessions")]
    finally:
        conn.close()


async def test_session_list_mirrors_list_sessions_flags(datasette, capsem_home, cache_dir):
    everything = main_rows(capsem_home, cache_dir)
    url = "/main/session_list.json"
    assert len(await rows(datasette, url)) == min(10, len(everything))
    listed = await rows(datasette, url, n="1000", all="1")
    assert len(listed) == len(everything)
    assert [r["created_at"] for r in listed] == sorted(
        (r["created_at"] for r in listed), reverse=True
    )
    not_vacuumed = [r for r in everything if r["status"] != "vacuumed"]
    assert len(await rows(datasette, url, n="1000")) == len(not_vacuumed)
    with_model = [
        r for r in not_vacuumed if (r["total_input_tokens"] or 0) + (r["total_output_tokens"] or 0)
    ]
    assert len(await rows(datasette, url, n="1000", with_model="true")) == len(with_model)
    with_tools = [r for r in not_vacuumed if r["total_tool_calls"]]
    assert len(await rows(datasette, url, n="1000", with_tools="yes")) == len(with_tools)
    with_net = [r for r in not_vacuumed if r["total_requests"]]
    assert len(await rows(datasette, url, n="1000", with_net="1")) == len(with_net)
    pricey = [r for r in not_vacuumed if (r["total_estimated_cost"] or 0) >= 0.2]
    found = await rows(datasette, url, n="1000", min_cost="0.2")
    assert {r["id"] for r in found} == {r["id"] for r in pricey}
    assert all(r["cost"].startswith("$") for r in found)
    running = [r for r in listed if r["status"] == "running"]
    assert running and all(r["dur"] == "running" for r in running)


async def test_daily_totals_add_up_to_main_db(datasette, capsem_home, cache_dir):
    everything = main_rows(capsem_home, cache_dir)
    found = await rows(datasette, "/main/daily_totals.json")
    assert sum(r["sessions"] for r in found) == len(everything)
    assert sum(r["input_tokens"] for r in found) == sum(r["total_input_tokens"] for r in everything)
    cost = sum(r["total_estimated_cost"] for r in everything)
    assert math.isclose(sum(r["cost_usd"] for r in found), cost, abs_tol=1e-6)


# -- bad parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query,params",
    [
        ("trace_chain", {}),
        ("trace_chain", {"trace_id": ""}),
        ("trace_chain", {"trace_id": "no-such-trace"}),
        ("trace_chain", {"trace_id": "' OR 1=1 --"}),
        ("trace_chain", {"trace_id": "x'); DROP TABLE model_calls; --"}),
        ("turn_chain", {"turn_id": "\x00"}),
        ("model_call", {"model_call_id": "abc"}),
        ("model_call", {"model_call_id": "1 OR 1=1"}),
        ("model_call", {"model_call_id": "-1"}),
        ("model_call", {"model_call_id": "99999999999999999999999"}),
        ("model_call", {}),
    ],
)
async def test_bad_session_parameters_give_empty_results(datasette, manifest, query, params):
    session = by_era(manifest)["head"]
    assert await rows(datasette, f"/{session['id']}/{query}.json", **params) == []
    page = await datasette.client.get(f"/{session['id']}/{query}", params=params)
    assert page.status_code == 200


@pytest.mark.parametrize(
    "params",
    [
        {"min_cost": "abc"},
        {"min_cost": "1; DROP TABLE sessions"},
        {"min_cost": "-1"},
        {"n": "-5"},
        {"n": "ten"},
        {"all": "maybe"},
        {"with_model": "' OR '1'='1"},
    ],
)
async def test_bad_session_list_parameters_give_no_rows(datasette, params):
    assert await rows(datasette, "/main/session_list.json", **params) == []
    page = await datasette.client.get("/main/session_list", params=params)
    assert page.status_code == 200


async def test_an_outside_query_registers_through_the_hook(datasette, manifest):

    class BiggestBodies:
        @hookimpl
        def capsem_queries(self):
            return [
                QuerySpec(
                    id="biggest_bodies",
                    name="biggest_bodies",
                    title="Biggest bodies",
                    description="The largest captured bodies, for a test of the plugin hook.",
                    sql="SELECT id, stored_bytes FROM event_body_blobs "
                    "ORDER BY stored_bytes DESC LIMIT 3",
                    requires={"event_body_blobs": ("id", "stored_bytes")},
                )
            ]

    plugin = BiggestBodies()
    plugin_manager().register(plugin)
    try:
        current = by_era(manifest)["head"]
        assert len(await rows(datasette, f"/{current['id']}/biggest_bodies.json")) == 3
        old = by_era(manifest)["0.16"]
        gone = await datasette.client.get(f"/{old['id']}/biggest_bodies.json")
        assert gone.status_code == 404
    finally:
        plugin_manager().unregister(plugin)
    missing = await datasette.client.get(f"/{by_era(manifest)['head']['id']}/biggest_bodies.json")
    assert missing.status_code == 404


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_percentiles_on_large_groups_equal_python_nearest_rank(tmp_path):
    """A long session gives tools hundreds of calls, so p50/p90/p95/p99 really differ."""

    home = tmp_path / "home"
    found = generate_home(
        home,
        GenerateOptions(seed=2, big_session_rows=6000, defects=False, hostile=False, broken=False),
    )
    big = max(
        sessions_in(found, has=("ledger",), lacks=("alias_of",)),
        key=lambda s: sum(s["counts"].values()),
    )
    conn = open_readonly(home / big["ledger"], tmp_path / "cache")
    try:
        query = canned_queries_for(read_schema(conn), "session")["tool_usage_stats"]
        conn.row_factory = sqlite3.Row
        stats = [dict(r) for r in conn.execute(query["sql"])]
        durations: dict[tuple, list[int]] = {}
        for r in conn.execute("SELECT tool_name, origin, duration_ms FROM tool_calls"):
            if r["duration_ms"] is not None:
                durations.setdefault((r["tool_name"], r["origin"]), []).append(r["duration_ms"])
    finally:
        conn.close()
    large = [s for s in stats if len(durations[(s["tool_name"], s["origin"])]) >= 50]
    assert large
    for row in large:
        values = durations[(row["tool_name"], row["origin"])]
        for p in (50, 90, 95, 99):
            assert row[f"p{p}_ms"] == nearest_rank(values, p), (row["tool_name"], p)
    assert any(row["p50_ms"] < row["p90_ms"] < row["p99_ms"] for row in large)


async def test_a_malformed_core_parameter_is_a_400_not_a_500(datasette, manifest):
    session = by_era(manifest)["head"]
    for path in (f"/{session['id']}/trace_chain", f"/{session['id']}/trace_chain.json"):
        response = await datasette.client.get(path, params={"_timelimit": "abc"})
        assert response.status_code == 400 and "_timelimit" in response.text


def _selects_several_columns(sql: str, start: int) -> bool:
    """Whether the SELECT list starting at `start` has a comma outside parentheses."""
    depth = 0
    for match in re.finditer(r"[(),]|\bFROM\b", sql[start:], re.IGNORECASE):
        token = match.group(0)
        if token == "(":
            depth += 1
        elif token == ")":
            if depth == 0:
                return False
            depth -= 1
        elif depth == 0:
            return token == ","
    return False


def test_no_sql_of_the_product_compares_row_values_with_not_in():
    """`(a, b) NOT IN (SELECT x, y ...)` makes SQLite 3.40 scan the whole list for every row it
    does not find (it looks for a NULL that would make the answer NULL): the orphan-response
    check took 13 s on a 500-call Ollama session logging 189,000 responses, and 0.16 s with
    NOT EXISTS. Every query and check SQL file is read, comments left out."""
    package = Path(__file__).resolve().parent.parent / "datasette_capsem"
    offenders = []
    for path in sorted(package.rglob("*.sql")):
        sql = re.sub(r"--[^\n]*", "", path.read_text("utf-8"))
        for match in re.finditer(r"\bNOT\s+IN\s*\(\s*SELECT\b", sql, re.IGNORECASE):
            if _selects_several_columns(sql, match.end()):
                offenders.append(path.relative_to(package).as_posix())
    assert offenders == []
