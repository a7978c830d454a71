"""The session list: figures equal the files, their sources, filters, sorting, pagination."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest
from datasette.utils import MultiParams, tilde_encode

from datasette_capsem.catalog import Catalog
from datasette_capsem.checks.runner import check_catalog_session
from datasette_capsem.config import load_settings
from datasette_capsem.generate import GenerateOptions, generate_home
from datasette_capsem.index import filters
from datasette_capsem.index.listing import (
    SORTABLE,
    SessionTable,
    _sort_key,
    build_row,
    list_entry,
)
from datasette_capsem.permissions import DATASETTE_1
from datasette_capsem.readonly import LedgerUnavailable, open_readonly
from datasette_capsem.state import get_state
from tests.helpers import actor_cookies, make_datasette, session_in, sessions_in
from tests.test_index import direct_sums, same

pytestmark = pytest.mark.asyncio(loop_scope="session")

# list figure -> (main.db columns summed, ledger figures summed)
FIGURES = {
    "cost": (("total_estimated_cost",), ("cost_usd",)),
    "requests": (("total_requests",), ("requests",)),
    "tokens": (("total_input_tokens", "total_output_tokens"), ("input_tokens", "output_tokens")),
    "tool_calls": (("total_tool_calls",), ("tool_calls",)),
    "file_events": (("total_file_events",), ("file_events",)),
    "mcp_calls": (("total_mcp_calls",), ("mcp_calls",)),
}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("list-cache")


@pytest.fixture(scope="module")
def main_rows(capsem_home, manifest, cache_dir) -> dict[str, dict]:
    conn = open_readonly(capsem_home / manifest["main_db"], cache_dir)
    conn.row_factory = sqlite3.Row
    try:
        return {row["id"]: dict(row) for row in conn.execute("SELECT * FROM sessions")}
    finally:
        conn.close()


async def listed(datasette, query: str = "") -> dict:
    response = await datasette.client.get(f"/-/capsem/sessions.json?_size=max&{query}")
    assert response.status_code == 200, response.text[:500]
    return response.json()


async def test_figures_equal_the_files_and_name_their_source(
    capsem_home, manifest, cache_dir, main_rows, indexed_datasette
):
    datasette = indexed_datasette
    rows = {r["id"]: r for r in (await listed(datasette, "all=1"))["sessions"]}
    by_id = {s["id"]: s for s in manifest["sessions"]}
    sources_seen = set()
    for session_id, row in rows.items():
        session = by_id.get(session_id)
        ledger = None
        if session and session.get("ledger") and row["indexed"] and not row["index_problem"]:
            ledger = direct_sums(capsem_home / session["ledger"], cache_dir)
        for figure, (columns, fields) in FIGURES.items():
            source = row["sources"][figure]
            sources_seen.add(source)
            if source == "main.db":
                expected = sum(main_rows[session_id][c] for c in columns)
            elif source == "ledger":
                assert ledger is not None, (session_id, session)
                expected = sum(ledger[f] for f in fields)
            else:
                assert row[figure] is None
                continue
            assert same(row[figure], expected), (session_id, figure, source)
    assert {"main.db", "ledger"} <= sources_seen


async def test_every_kind_and_era_is_listed(manifest, indexed_datasette):
    datasette = indexed_datasette
    rows = {r["id"]: r for r in (await listed(datasette, "all=1"))["sessions"]}
    expected = sessions_in(manifest, where=lambda s: s.get("ledger") or s.get("main_db_row"))
    assert {s["id"] for s in expected} <= set(rows)
    kinds = {rows[s["id"]]["kind"] for s in expected}
    assert {
        "ephemeral",
        "persistent",
        "failed",
        "run",
        "legacy",
        "legacy_gz",
        "index_only",
    } <= kinds


async def test_running_and_resumed_rows_use_the_ledger(manifest, indexed_datasette):
    datasette = indexed_datasette
    rows = {r["id"]: r for r in (await listed(datasette, "all=1"))["sessions"]}
    running = session_in(manifest, status="running", has=("ledger",))
    row = rows[running["id"]]
    assert row["main_db_stale"].startswith("running")
    assert set(row["sources"].values()) == {"ledger"}
    assert row["tokens"] == running["totals"]["input_tokens"] + running["totals"]["output_tokens"]
    stale_only = next(d["session"] for d in manifest["defects"] if d["kind"] == "stale_running")
    assert rows[stale_only]["main_db_stale"] and rows[stale_only]["sources"]["cost"] == "main.db"
    no_row = session_in(manifest, has=("ledger",), lacks=("main_db_row", "broken"))
    assert rows[no_row["id"]]["sources"]["requests"] == "ledger"


async def test_mismatched_rollups_are_flagged(manifest, indexed_datasette):
    datasette = indexed_datasette
    rows = {r["id"]: r for r in (await listed(datasette, "all=1"))["sessions"]}
    flagged = {d["session"] for d in manifest["defects"] if d["kind"] == "rollup_mismatch"}
    assert flagged
    for session_id in flagged:
        assert rows[session_id]["rollup_mismatch"], session_id
    clean = sessions_in(manifest, status="stopped", era="head", has=("clean", "ledger"))
    assert clean
    for session in clean:
        assert rows[session["id"]]["rollup_mismatch"] == {}, session["id"]
    page = await datasette.client.get("/-/capsem?all=1&_size=max")
    assert "≠ rollup" in page.text


def _ok(rows, test) -> bool:
    return bool(rows) and all(test(r) for r in rows)


async def test_list_sessions_flags_and_filters(manifest, indexed_datasette):
    datasette = indexed_datasette
    everything = (await listed(datasette, "all=1"))["sessions"]
    default = (await listed(datasette))["sessions"]
    assert any(r["status"] == "vacuumed" for r in everything)
    assert not any(r["status"] == "vacuumed" for r in default)
    checks = {
        "with_db=1": lambda r: r["has_ledger"],
        "with_model=1": lambda r: r["tokens"] > 0,
        "with_net=on": lambda r: r["requests"] > 0,
        "with_tools=true": lambda r: r["tool_calls"] > 0,
        "min_cost=0.1": lambda r: r["cost"] >= 0.1,
        "status=running": lambda r: r["status"] == "running",
        "status=stopped,crashed": lambda r: r["status"] in ("stopped", "crashed"),
        "kind=legacy&kind=legacy_gz&all=1": lambda r: r["kind"] in ("legacy", "legacy_gz"),
        "since=2026-07-01": lambda r: r["created_at"] >= "2026-07-01",
        "until=2026-06-30": lambda r: r["created_at"][:10] <= "2026-06-30",
        "q=CO-WORK": lambda r: "co-work" in (r["id"] + (r["name"] or "")).lower(),
        "with_db=1&with_model=1&min_cost=0.01": lambda r: r["has_ledger"] and r["cost"] >= 0.01,
    }
    for query, test in checks.items():
        rows = (await listed(datasette, query))["sessions"]
        assert _ok(rows, test), query
        assert len(rows) < len(everything), query
    with_db = (await listed(datasette, "with_db=1&all=1"))["sessions"]
    assert {r["id"] for r in with_db} == {r["id"] for r in everything if r["has_ledger"]}
    html = await datasette.client.get("/-/capsem?with_db=1&all=1&_size=max")
    assert html.status_code == 200
    assert f"{len(with_db)} of " in html.text


async def test_sorting_by_every_column(indexed_datasette):
    datasette = indexed_datasette
    for column, field in [
        ("cost", "cost"),
        ("tokens", "tokens"),
        ("created", "created_at"),
        ("name", "name"),
        ("duration", "duration_seconds"),
    ]:
        for param, descending in (("_sort", False), ("_sort_desc", True)):
            rows = (await listed(datasette, f"all=1&{param}={column}"))["sessions"]
            values = [r[field] for r in rows]
            present = [v.lower() if isinstance(v, str) else v for v in values if v is not None]
            assert present == sorted(present, reverse=descending), (column, param)
            assert all(v is None for v in values[len(present) :]), "missing values sort last"
    page = await datasette.client.get("/-/capsem?_sort=cost")
    assert "_sort_desc=cost" in page.text  # the header link flips the direction


async def test_pagination_follows_datasette_conventions(
    capsem_home, indexed_datasette, index_cache_dir
):
    datasette = indexed_datasette
    everything = [r["id"] for r in (await listed(datasette, "all=1"))["sessions"]]
    seen, url = [], "/-/capsem/sessions.json?all=1&_size=7"
    while url:
        body = (await datasette.client.get(url)).json()
        assert len(body["sessions"]) <= 7
        seen += [r["id"] for r in body["sessions"]]
        url = "/-/capsem/sessions.json" + body["next_url"] if body["next"] else None
    assert seen == everything
    small = await make_datasette(capsem_home, index_cache_dir, settings={"max_returned_rows": 10})
    assert (
        len((await small.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()["sessions"])
        == 10
    )
    page = await datasette.client.get("/-/capsem?all=1&_size=5")
    assert "_next=5" in page.text


@pytest.mark.parametrize(
    "query",
    [
        "min_cost=abc",
        "min_cost=nan",
        "_size=0",
        "_size=lots",
        "_size=100000",
        "_next=-3",
        "_next=x",
        "kind=vm",
        "since=yesterday",
        "until=2026-13",
        "since=2026-08-01&until=2026-07-01",
        "_sort=secret",
        "_sort=cost&_sort_desc=cost",
        "with_db=maybe",
        "q=" + "x" * 300,
    ],
)
async def test_bad_parameters_are_a_400_with_a_message(capsem_home, query, index_cache_dir):
    datasette = await make_datasette(capsem_home, index_cache_dir, index_refresh_seconds=0)
    for path in ("/-/capsem/sessions.json", "/-/capsem/charts/usage.json"):
        response = await datasette.client.get(f"{path}?{query}")
        assert response.status_code == 400, (path, query)
        assert response.json()["error"] == "Bad parameter"
    html = await datasette.client.get(f"/-/capsem?{query}")
    assert html.status_code == 400 and "Bad parameter" in html.text


async def test_page_shows_names_beside_ids_and_index_freshness(manifest, indexed_datasette):
    datasette = indexed_datasette
    page = (await datasette.client.get("/?_size=max&all=1")).text
    named = sessions_in(manifest, has=("name", "main_db_row"), where=lambda s: s["name"] != s["id"])
    assert named
    for session in named:
        assert f"<code>{session['id']}</code>" in page
        # the name is a link to the session too (issue 11)
        href = f"/-/capsem/sessions/{session['id']}"
        assert f'<td><a href="{href}">{session["name"]}</a></td>' in page
    assert "ledgers indexed" in page
    # Under the CSP, the only inline scripts are Datasette's own (allowed by their hashes): its
    # menus' closer, and on 1.0 the line that names its version.
    ours = 2 if DATASETTE_1 else 1
    assert page.count("<script>") == ours and "document.body.addEventListener" in page
    assert ("window.datasetteVersion" in page) == DATASETTE_1


async def test_charts_follow_the_filters(indexed_datasette):
    datasette = indexed_datasette
    for query in ("all=1", "kind=persistent&all=1"):
        rows = (await listed(datasette, query))["sessions"]
        ledger_tokens = sum(r["tokens"] for r in rows if r["sources"]["tokens"] == "ledger")
        usage = (await datasette.client.get(f"/-/capsem/charts/usage.json?{query}")).json()["rows"]
        indexed = get_state(datasette).index.snapshot().ledgers
        expected = sum(
            (indexed[r["id"]]["input_tokens"] or 0) + (indexed[r["id"]]["output_tokens"] or 0)
            for r in rows
            if r["id"] in indexed and not indexed[r["id"]]["problem"]
        )
        assert sum(u["tokens"] for u in usage) == expected >= ledger_tokens
        per_day = (await datasette.client.get(f"/-/capsem/charts/sessions.json?{query}")).json()
        assert sum(d["sessions"] for d in per_day["rows"]) == sum(
            1 for r in rows if r["created_at"]
        )


async def test_a_hostile_name_is_escaped_everywhere_it_is_shown(tmp_path, private_home):
    home = private_home
    registry_path = home / "run" / "persistent_registry.json"
    registry = json.loads(registry_path.read_text())
    payload = '<img src=x onerror="alert(1)">'
    name, entry = next(iter(registry["vms"].items()))
    entry["name"] = payload
    registry["vms"] = {payload: entry, **{k: v for k, v in registry["vms"].items() if k != name}}
    registry_path.write_text(json.dumps(registry))
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    for path in ("/?_size=max&all=1", f"/-/capsem?q={payload}"):
        page = await datasette.client.get(path)
        assert page.status_code == 200
        assert payload not in page.text and "&lt;img src=x" in page.text
    body = (await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
    assert payload in [row["name"] for row in body["sessions"]]


# -- one rollup comparison: old main.db, legacy run rows, resumed VMs; list == checks ----------


@pytest.fixture(scope="module")
def old_home(tmp_path_factory) -> tuple[Path, dict]:
    """A home whose main.db predates 2026-06-24: it still has total_mcp_calls, always 0."""
    path = tmp_path_factory.mktemp("old-main-db") / "home"
    return path, generate_home(path, GenerateOptions(old_main_db=True))


def check_verdicts(home: Path, cache_dir: Path) -> dict[str, str]:
    """{session id: severity} of the integrity check's rollup_mismatch findings."""
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache_dir)})
    found = {}
    for session in Catalog(settings).sessions():
        try:
            report = check_catalog_session(session, settings)
        except LedgerUnavailable:
            continue
        for finding in report.problems:
            if finding.kind == "rollup_mismatch":
                found[session.id] = finding.severity
    return found


async def list_verdicts(home: Path, cache_dir: Path) -> dict[str, dict]:
    datasette = await make_datasette(home, cache_dir, index_refresh_seconds=0)
    get_state(datasette).index.refresh()
    return {r["id"]: r for r in (await listed(datasette, "all=1"))["sessions"]}


def assert_list_and_checks_agree(rows: dict[str, dict], checks: dict[str, str]) -> None:
    flagged = {sid for sid, row in rows.items() if row["rollup_mismatch"]}
    ahead = {sid for sid, row in rows.items() if row["rollup"] == "ahead"}
    assert flagged == {sid for sid, severity in checks.items() if severity == "error"}
    assert ahead == {sid for sid, severity in checks.items() if severity == "warning"}
    for sid in flagged:
        assert rows[sid]["rollup"] == "mismatch"
    for sid in ahead:
        assert rows[sid]["main_db_stale"] and not rows[sid]["rollup_mismatch"]


async def test_an_old_main_db_raises_no_false_rollup_flags(old_home, tmp_path):
    home, manifest = old_home
    conn = open_readonly(home / manifest["main_db"], tmp_path / "direct")
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(sessions)")}
    finally:
        conn.close()
    assert "total_mcp_calls" in columns
    rows = await list_verdicts(home, tmp_path / "cache")
    checks = check_verdicts(home, tmp_path / "cache")
    injected = {d["session"] for d in manifest["defects"] if d["kind"] == "rollup_mismatch"}
    assert {sid for sid, row in rows.items() if row["rollup_mismatch"]} == injected
    assert set(checks) == injected
    assert_list_and_checks_agree(rows, checks)
    for sid in injected:
        assert "total_mcp_calls" not in rows[sid]["rollup_mismatch"]
    # MCP calls come from the ledger, never from the column HEAD leaves at 0.
    by_id = {s["id"]: s for s in manifest["sessions"]}
    for sid, row in rows.items():
        if row["indexed"] and not row["index_problem"]:
            assert row["sources"]["mcp_calls"] == "ledger", sid
            ledger = direct_sums(
                home / by_id.get(sid, by_id.get(row["same_vm_as"]))["ledger"], tmp_path / "direct"
            )
            assert row["mcp_calls"] == ledger["mcp_calls"], sid
        elif row["in_main_db"] and (row["stopped_at"] or row["created_at"]) >= "2026-06-24":
            assert row["mcp_calls"] is None and row["sources"]["mcp_calls"] is None, sid


def _main_db(home: Path, manifest: dict) -> sqlite3.Connection:
    return sqlite3.connect(home / manifest["main_db"])


async def test_list_and_checks_flag_the_same_sessions(manifest, tmp_path, private_home):
    home = private_home
    by_id = {s["id"]: s for s in manifest["sessions"]}
    clean = [
        s["id"]
        for s in sessions_in(
            manifest, status="stopped", kind="ephemeral", has=("clean", "ledger"), lacks=("live",)
        )
    ]
    vacuumed = session_in(manifest, status="vacuumed")["id"]
    persistent = session_in(
        manifest,
        kind="persistent",
        era="head",
        has=("clean", "ledger"),
        lacks=("forked_from", "alias_of"),
    )
    assert by_id["code-3"]["kind"] == by_id["co-work-2"]["kind"] == "run"
    conn = _main_db(home, manifest)
    with conn:
        # capsem run before 2026-06-26: rolled up with 0 tokens, cost and tool calls (§3.5).
        conn.execute(
            "UPDATE sessions SET created_at = '2026-05-02T10:00:00Z',"
            " stopped_at = '2026-05-02T10:30:00Z', total_input_tokens = 0,"
            " total_output_tokens = 0, total_estimated_cost = 0, total_tool_calls = 0"
            " WHERE id = 'code-3'"
        )
        # The same zeros on a run row stopped after the rollup was restored are a mismatch.
        conn.execute("UPDATE sessions SET total_input_tokens = 0 WHERE id = 'co-work-2'")
        conn.execute(
            "UPDATE sessions SET total_requests = total_requests + 5 WHERE id = ?", (vacuumed,)
        )
        conn.execute(
            "UPDATE sessions SET total_file_events = total_file_events - 1 WHERE id = ?",
            (clean[0],),
        )
    conn.close()
    writer = sqlite3.connect(home / persistent["ledger"])  # resumed: the ledger grows
    with writer:
        writer.execute(
            "INSERT INTO fs_events (timestamp, action, path) VALUES"
            " ('2026-08-20T00:00:00Z', 'created', 'after-resume')"
        )
    writer.close()

    rows = await list_verdicts(home, tmp_path / "cache")
    checks = check_verdicts(home, tmp_path / "cache")
    assert_list_and_checks_agree(rows, checks)
    injected = {d["session"] for d in manifest["defects"] if d["kind"] == "rollup_mismatch"}
    assert set(checks) == injected | {"co-work-2", vacuumed, clean[0], persistent["id"]}
    assert checks[persistent["id"]] == "warning" and rows[persistent["id"]]["rollup"] == "ahead"
    assert "code-3" not in checks and rows["code-3"]["rollup"] == "ok"
    assert set(rows["co-work-2"]["rollup_mismatch"]) == {"total_input_tokens"}
    # A legacy run row's zeros are not figures: the ledger's are shown, or nothing.
    assert rows["code-3"]["sources"]["tokens"] == "ledger" and rows["code-3"]["tokens"] > 0
    legacy_run = session_in(manifest, kind="run", status="stopped", lacks=("ledger",))["id"]
    assert rows[legacy_run]["created_at"] < "2026-06-26"
    for figure in ("tokens", "cost", "tool_calls"):
        assert rows[legacy_run][figure] is None and rows[legacy_run]["sources"][figure] is None
    assert rows[legacy_run]["sources"]["requests"] == "main.db"


async def test_a_fork_and_an_alias_list_their_whole_file(capsem_home, manifest, cache_dir):
    rows = await list_verdicts(capsem_home, cache_dir)
    fork = session_in(manifest, has=("forked_from",))
    alias = session_in(manifest, has=("alias_of",))
    whole = direct_sums(capsem_home / fork["ledger"], cache_dir)
    assert rows[fork["id"]]["rollup"] == "ok" and rows[fork["id"]]["inherited_from"]
    assert rows[fork["id"]]["requests"] == whole["requests"]  # as main.db counts it
    assert rows[alias["id"]]["indexed"] and rows[alias["id"]]["rollup"] == "ok"
    assert rows[alias["id"]]["same_vm_as"] == alias["alias_of"]


async def test_the_rendered_rows_follow_the_list_and_the_reader(tmp_path, private_home):
    """The page's rows are rendered once per list build, filter, page and credential policy:
    a renamed session shows its new name at once, and the rows rendered for a reader who may
    see secrets are never served to one who may not (nor the other way round)."""
    home = private_home
    registry_path = home / "run" / "persistent_registry.json"
    registry = json.loads(registry_path.read_text())
    name, entry = next(iter(registry["vms"].items()))
    secret = "ghp_PLANTEDSECRET0123456789abcdefghijklmn"

    def rename(new: str) -> None:
        entry["name"] = new
        registry["vms"] = {new: entry, **{k: v for k, v in registry["vms"].items() if k != name}}
        registry_path.write_text(json.dumps(registry))

    rename(f"renamed-{secret}")
    datasette = await make_datasette(
        home, tmp_path / "cache", index_refresh_seconds=0, view_secrets={"id": "auditor"}
    )
    page = "/-/capsem?q=renamed&all=1"
    viewer = (await datasette.client.get(page)).text
    auditor = (await datasette.client.get(page, cookies=actor_cookies(datasette, "auditor"))).text
    again = (await datasette.client.get(page)).text
    assert f"renamed-{secret}" in auditor
    assert secret not in viewer and secret not in again and "renamed-" in viewer
    name = f"renamed-{secret}"
    rename("renamed-again")
    get_state(datasette).catalog.refresh(force=True)
    after = (await datasette.client.get(page, cookies=actor_cookies(datasette, "auditor"))).text
    assert "renamed-again" in after and secret not in after


async def test_the_compact_list_pages_as_whole_rows_would(indexed_datasette):
    """The list keeps compact entries and builds a row only for the rows a page shows: every
    sort and filter pages exactly as sorting and filtering every session's whole row would,
    and a session whose inputs change gets a new row, not the one shown before."""
    datasette = indexed_datasette
    state = get_state(datasette)
    catalog, index = state.catalog.snapshot(), state.index.snapshot()
    table = SessionTable(state.catalog.database_name)
    built = table.rows(catalog, index)
    whole = [
        build_row(
            entry.inputs[0],
            entry.inputs[1],
            "/" + tilde_encode(state.catalog.database_name(entry.inputs[0])),
            entry.inputs[2],
        )
        for entry in built.rows
    ]
    assert len(whole) == len(catalog.sessions) > 20
    queries = [
        "all=1",
        "",
        "with_model=1&min_cost=0.01",
        "has_errors=1&all=1",
        "q=a&all=1",
        "kind=persistent,ephemeral&all=1",
        "has_warnings=1",
        "since=2026-01-01&all=1",
    ]
    for column in SORTABLE:
        for descending in (False, True):
            for params in queries:
                args = MultiParams([tuple(p.split("=")) for p in params.split("&") if p])
                query = filters.parse_query(args, default_size=100, max_size=1000)
                order = (column, descending)
                entries = table.filtered(
                    built, order, query.signature(), lambda o, q=query: filters.apply(o, q)
                )
                expected = filters.apply(
                    sorted(whole, key=_sort_key(column, descending), reverse=descending), query
                )
                assert table.full_rows(entries) == expected, (column, descending, params)
    first = built.rows[0]
    shown = table.full_rows([first])[0]
    assert table.full_rows([first])[0] is shown  # kept while its inputs are the same
    session = dataclasses.replace(first.inputs[0], name="a new name")
    changed = list_entry(shown, (session, *first.inputs[1:]))
    assert table.full_rows([changed])[0]["name"] == "a new name"
