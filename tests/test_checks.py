"""The integrity report finds exactly the generator's injected defects, era by era.

The manifest lists every defect as (kind, table, row_id) per session; a report is turned into
the same shape (row-level findings one entry per row id, file-level ones with row_id None) and
the two must be equal for every session, clean ones included.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from datasette_capsem.catalog import Catalog
from datasette_capsem.checks import (
    Check,
    CheckContext,
    Finding,
    Report,
    SqlCheck,
    SqlVariant,
    check_session,
    hookimpl,
)
from datasette_capsem.checks.builtin import builtin_checks
from datasette_capsem.checks.runner import check_catalog_session
from datasette_capsem.config import load_settings
from datasette_capsem.findings import CHECKS_FOLDER, KINDS, load_kinds
from datasette_capsem.generate import GenerateOptions, generate_home
from datasette_capsem.ledger import rollup
from datasette_capsem.ledger.schema import read_schema
from datasette_capsem.plugins import plugin_manager
from datasette_capsem.queries import canned_queries_for
from datasette_capsem.readonly import LedgerUnavailable, open_readonly
from tests.helpers import session_in, sessions_in, snapshot_tree

pytestmark = pytest.mark.asyncio(loop_scope="session")
EVERY_SAMPLE = 1_000_000


@pytest.fixture(scope="module")
def settings(capsem_home, cache_dir):
    return load_settings({"capsem_home": str(capsem_home), "cache_dir": str(cache_dir)})


@pytest.fixture(scope="module")
def catalog(settings) -> Catalog:
    return Catalog(settings)


def as_entries(report) -> set[tuple]:
    """A report in the manifest's shape: {(kind, table, row_id)}."""
    entries = set()
    for finding in report.problems:
        assert finding.failed is None, (finding.check, finding.failed)
        if finding.row_ids:
            entries |= {(finding.kind, finding.table, row_id) for row_id in finding.row_ids}
        else:
            entries.add((finding.kind, finding.table, None))
    return entries


# Eras whose files Capsem's own validate_ready_schema refuses (they predate the 1.3 columns):
# the report says so with one info finding (capsem_ready_schema), a fact of the era.
PRE_READY_ERAS = {"0.9", "2026-03-13", "0.16", "1.1", "1.2"}


def expected_entries(manifest: dict) -> dict[str, set[tuple]]:
    """What each session's report must hold: its injected defects, the pairs Capsem's writer
    could not match (a habit the report names as info), and the era's readiness fact."""
    expected: dict[str, set[tuple]] = defaultdict(set)
    for defect in manifest["defects"]:
        expected[defect["session"]].add((defect["kind"], defect["table"], defect["row_id"]))
    for habit in manifest["habits"]:
        if habit["kind"] == "unpairable_tool_ids":
            expected[habit["session"]].add((habit["kind"], habit["table"], habit["row_id"]))
        if habit["kind"] == "results_in_another_trace":  # a writer path the report names (info)
            expected[habit["session"]].add(
                ("result_in_another_trace", "tool_responses", habit["row_id"])
            )
    for session in manifest["sessions"]:
        era, broken, alias = session.get("era"), session.get("broken"), session.get("alias_of")
        if era in PRE_READY_ERAS and not broken and not alias:
            expected[session["id"]].add(("capsem_ready_schema", "file", None))
    return expected


def sample_of(manifest: dict, **match) -> dict:
    return session_in(manifest, **match)


def report_for(session_id: str, catalog: Catalog, settings, **kwargs):
    return check_catalog_session(catalog.get(session_id), settings, **kwargs)


# -- exactly the manifest ---------------------------------------------------------------------


async def test_every_session_reports_exactly_its_injected_defects(manifest, catalog, settings):
    expected = expected_entries(manifest)
    checked_eras = set()
    for session in manifest["sessions"]:
        if session.get("broken"):
            continue
        owner = session.get("alias_of") or session["id"]  # an alias shares its owner's file
        report = report_for(session["id"], catalog, settings, sample_limit=EVERY_SAMPLE)
        assert as_entries(report) == expected.get(owner, set()), session["id"]
        if session.get("clean"):
            assert report.verdict == "ok", session["id"]
        checked_eras.add(session.get("era"))
    assert {"head", "0.16", "1.1", "migrated", None} <= checked_eras


async def test_a_session_checked_alone_reads_the_whole_file_on_a_second_connection(
    manifest, catalog, settings, monkeypatch
):
    """`check` of one session runs integrity_check on a second connection while the other
    checks run (so it uses the second core); its report is the one run in one connection
    gives, for every session with a ledger, defects and eras included."""
    opened: list[tuple[Path, list[str]]] = []
    real_open = open_readonly

    def open_and_watch(path, cache_dir):
        conn = real_open(path, cache_dir)
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        opened.append((Path(path), statements))
        return conn

    monkeypatch.setattr("datasette_capsem.checks.runner.readonly.open_readonly", open_and_watch)
    compared = 0
    for session in sessions_in(manifest, has=("ledger",), lacks=("broken",)):
        opened.clear()
        alone = report_for(session["id"], catalog, settings, sample_limit=EVERY_SAMPLE, alone=True)
        ledger = catalog.get(session["id"]).ledger_path
        on_the_ledger = [statements for path, statements in opened if path == ledger]
        assert len(on_the_ledger) == 2, session["id"]
        first, second = on_the_ledger
        assert any("integrity_check" in sql for sql in second), session["id"]
        assert not any("integrity_check" in sql for sql in first), session["id"]
        together = report_for(session["id"], catalog, settings, sample_limit=EVERY_SAMPLE)
        assert [f.to_dict() for f in alone.findings] == [f.to_dict() for f in together.findings], (
            session["id"]
        )
        compared += 1
    assert compared > 10


async def test_an_old_main_db_reports_exactly_its_injected_defects(tmp_path):
    """main.db before 2026-06-24 keeps total_mcp_calls at 0: no session may be flagged for it."""
    home = tmp_path / "home"
    manifest = generate_home(home, GenerateOptions(old_main_db=True))
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(tmp_path / "cache")})
    catalog = Catalog(settings)
    expected = expected_entries(manifest)
    compared = 0
    for session in manifest["sessions"]:
        if session.get("broken"):
            continue
        owner = session.get("alias_of") or session["id"]
        report = report_for(session["id"], catalog, settings, sample_limit=EVERY_SAMPLE)
        assert as_entries(report) == expected.get(owner, set()), session["id"]
        found = next(f for f in report.findings if f.kind == "rollup_mismatch")
        compared += found.applicable
    assert compared > 10


async def test_the_rollup_comparison_rules():
    fresh = {column: 10 for column in rollup.ROLLUP_COLUMNS}
    row = {
        "status": "stopped",
        "mode": "ephemeral",
        "stopped_at": "2026-08-01T10:00:00Z",
        **fresh,
        "total_mcp_calls": 0,
    }
    assert rollup.compare_rollup(row, fresh).verdict == rollup.OK  # total_mcp_calls: never
    assert rollup.compare_rollup({**row, "total_tool_calls": 9}, fresh).verdict == rollup.MISMATCH
    # capsem run rows rolled up before 2026-06-26 wrote 0 tokens, cost and tool calls.
    zeros = dict.fromkeys(rollup.LEGACY_RUN_ZEROED, 0)
    legacy = {**row, **zeros, "mode": "run", "stopped_at": "2026-05-02T10:00:00Z"}
    assert rollup.compare_rollup(legacy, fresh).verdict == rollup.OK
    assert rollup.compare_rollup({**legacy, "total_requests": 3}, fresh).verdict == rollup.MISMATCH
    current_run = {**legacy, "stopped_at": "2026-07-02T10:00:00Z"}
    assert rollup.compare_rollup(current_run, fresh).verdict == rollup.MISMATCH
    # NULL: never written for this row; a figure the ledger lacks: not compared either.
    assert rollup.compare_rollup({**row, "exec_count": None}, fresh).verdict == rollup.OK
    assert rollup.compare_rollup(row, {**fresh, "exec_count": None}).verdict == rollup.OK
    # One status set: vacuumed rows are compared, running and terminated ones are not.
    assert rollup.compare_rollup({**row, "status": "vacuumed"}, fresh).applicable
    for status in ("running", "terminated"):
        assert not rollup.compare_rollup({**row, "status": status}, fresh).applicable
    assert not rollup.compare_rollup(row, None).applicable  # no ledger
    # Ahead of its row: expected for a resumed persistent VM only.
    behind = {**row, "total_requests": 4}
    assert rollup.compare_rollup(behind, fresh).verdict == rollup.MISMATCH
    assert rollup.compare_rollup(behind, fresh, kind="persistent").verdict == rollup.AHEAD
    over = {**row, "total_requests": 40}
    assert rollup.compare_rollup(over, fresh, kind="persistent").verdict == rollup.MISMATCH
    assert rollup.compare_rollup({**row, "total_estimated_cost": 10 + 1e-12}, fresh).verdict == "ok"


async def test_every_finding_kind_is_exercised_by_the_manifest(manifest):
    reported = {kind for entries in expected_entries(manifest).values() for kind, _, _ in entries}
    assert reported == set(KINDS)


async def test_every_built_in_check_declares_its_title_and_severity():
    """Beside its .sql in its .json (file checks: checks/filechecks.json); findings.py reads
    them, so a check without them is a failure here, not a blank title on a page."""
    for check in builtin_checks():
        assert check.kind in KINDS, check.id
        if isinstance(check, SqlCheck):
            assert check.title == KINDS[check.kind].title, check.id
            assert check.severity == KINDS[check.kind].severity.value, check.id
    assert {check.kind for check in builtin_checks()} == set(KINDS)


async def test_a_check_document_without_a_title_or_severity_is_refused(tmp_path):
    folder = tmp_path / "checks"
    shutil.copytree(Path(str(CHECKS_FOLDER)), folder)
    assert load_kinds(folder) == KINDS
    document = folder / "sql" / "ask_pending.json"
    original = document.read_text("utf-8")
    for key in ("title", "severity"):
        entry = {k: v for k, v in json.loads(original).items() if k != key}
        document.write_text(json.dumps(entry), "utf-8")
        with pytest.raises(ValueError, match=f"ask_pending.json: .* lacks {key}"):
            load_kinds(folder)
    disagreeing = {**json.loads(original), "kind": "bad_timestamp"}
    document.write_text(json.dumps(disagreeing), "utf-8")
    with pytest.raises(ValueError, match="disagree on finding kind 'bad_timestamp'"):
        load_kinds(folder)
    document.unlink()
    with pytest.raises(ValueError, match="no check declares .* of ask_pending"):
        load_kinds(folder)


async def test_broken_files_cannot_be_read(manifest, catalog, settings):
    for broken in manifest["broken_files"]:
        session = catalog.get(broken["session"])
        if broken["kind"] in ("unreadable", "wal_without_shm"):
            continue  # root reads a mode-000 file; a WAL without -shm is read from a snapshot
        with pytest.raises(LedgerUnavailable):
            check_catalog_session(session, settings)


async def test_a_reports_json_is_the_json_of_its_dict(manifest, catalog, settings):
    """`Report.to_json` (the stored report's text, its findings' JSON memoized by their
    fields) is `json.dumps(to_dict())` for every session, defects and eras included, and for
    findings whose values are equal as keys but not as JSON (True and 1, 0 and 0.0)."""
    separators = (",", ":")
    seen = 0
    for session in manifest["sessions"]:
        if session.get("broken") or catalog.get(session["id"]) is None:
            continue
        for _ in range(2):  # the second time through the memo
            report = report_for(session["id"], catalog, settings)
            assert report.to_json() == json.dumps(report.to_dict(), separators=separators)
        seen += 1
    assert seen > 10
    plain = Finding("null_event_id", "error", 0, "t", "e", table="tool_calls", check="c")
    odd = [
        plain,
        Finding("null_event_id", "error", False, "t", "e", table="tool_calls", check="c"),
        Finding("null_event_id", "error", 0.0, "t", "e", table="tool_calls", check="c"),
        Finding("null_event_id", "error", 0, "t", "e", applicable=1, table="tool_calls", check="c"),
        Finding("null_event_id", "error", 0, "t", "e", note=["x"], table="tool_calls", check="c"),
        Finding("null_event_id", "error", 2, "t", "e", row_ids=[1, 2], table="tool_calls"),
    ]
    for findings in (odd, odd[::-1]):
        report = Report(findings=findings, era="head", live=False)
        assert report.to_json() == json.dumps(report.to_dict(), separators=separators)
    with pytest.raises(TypeError):
        Report(
            findings=[Finding("k", "error", 1, "t", "e", row_ids=[b"x"])], era="", live=False
        ).to_json()


async def test_verdict_follows_the_most_severe_finding(manifest, catalog, settings):
    expected = expected_entries(manifest)
    for session_id, entries in expected.items():
        if catalog.get(session_id) is None:
            continue
        severities = {KINDS[kind].severity.value for kind, _, _ in entries}
        report = report_for(session_id, catalog, settings)
        want = "error" if "error" in severities else "warning" if "warning" in severities else "ok"
        assert report.verdict == want, session_id


async def test_findings_link_to_the_rows_that_prove_them(manifest, catalog, settings, datasette):
    for kind in ("orphan_tool_response", "bad_timestamp", "rollup_mismatch", "model_call_quality"):
        defect = next(d for d in manifest["defects"] if d["kind"] == kind)
        report = report_for(defect["session"], catalog, settings)
        finding = next(f for f in report.problems if f.kind == kind)
        assert finding.link and finding.explanation, kind
        response = await datasette.client.get(finding.link)
        assert response.status_code == 200, finding.link
        if defect["row_id"] is not None:
            assert (
                f">{defect['row_id']}<" in response.text or str(defect["row_id"]) in response.text
            )


# -- eras, liveness and files -----------------------------------------------------------------


async def test_checks_an_era_cannot_answer_say_so(manifest, catalog, settings):
    old = sample_of(manifest, era="0.16", kind="legacy")
    report = report_for(old["id"], catalog, settings)
    skipped = {f.kind: f for f in report.findings if not f.applicable}
    for kind in (
        "bad_event_id",
        "null_event_id",
        "unledgered_mcp_call",
        "orphan_body_blob",
        "dangling_security_event",
        "ask_lifecycle",
        "turn_trace_mismatch",
    ):
        assert kind in skipped, kind
        assert "not applicable" in skipped[kind].note or "none of" in skipped[kind].note
    assert skipped["bad_event_id"].note.endswith("event_id")
    ran = {f.kind for f in report.findings if f.applicable}
    assert {"orphan_tool_response", "tool_call_without_response", "model_call_quality"} <= ran
    orphan = next(f for f in report.findings if f.kind == "orphan_tool_response")
    assert orphan.note is None  # the call_id-only variant of the canned query ran


def mcp_in_mcp_calls(manifest: dict, capsem_home: Path, folder: Path) -> Path:
    """A copy of the migrated ledger shaped like a 2026-06-12..06-22 file: MCP tools/call rows
    live in mcp_calls (event_id since 06-06), not in tool_calls (event_id since 06-12)."""
    migrated = sample_of(manifest, era="migrated", alias_of=None)
    copy = folder / "session.db"
    source = open_readonly(capsem_home / migrated["ledger"], folder / "cache")
    target = sqlite3.connect(copy)
    try:
        source.backup(target)
        # A 06-06..06-24 writer gave mcp_calls an event_id; the migrated file's 1.2 -> 1.3 jump
        # did not (capsem-ddl README: path dependence), so add it as that writer would have.
        target.execute("ALTER TABLE mcp_calls ADD COLUMN event_id TEXT")
        moved = target.execute(
            "INSERT INTO mcp_calls (timestamp, server_name, method, tool_name, request_id, "
            "decision, duration_ms, trace_id, event_id) "
            "SELECT timestamp, COALESCE(server_name, 'mcp'), 'tools/call', tool_name, call_id, "
            "decision, duration_ms, trace_id, event_id FROM tool_calls WHERE origin = 'mcp'"
        ).rowcount
        target.execute("DELETE FROM tool_calls WHERE origin = 'mcp'")
        target.commit()
    finally:
        source.close()
        target.close()
    assert moved == 3
    return copy


def findings_of(report, *kinds: str) -> dict[str, Finding]:
    found = {f.kind: f for f in report.findings if f.kind in kinds}
    assert set(found) == set(kinds)
    return found


async def test_mcp_calls_in_mcp_calls_are_ledgered(manifest, capsem_home, tmp_path):
    """Files from 2026-06-12 to 06-22 keep MCP calls in mcp_calls: their security rows are
    neither an unledgered MCP call nor a dangling security event."""

    copy = mcp_in_mcp_calls(manifest, capsem_home, tmp_path)
    conn = open_readonly(copy, tmp_path / "cache")
    try:
        planted = conn.execute(
            "SELECT COUNT(*) FROM security_rule_events WHERE event_type = 'mcp.tool_call' "
            "AND event_id IN (SELECT event_id FROM mcp_calls)"
        ).fetchone()[0]
        assert planted == 3
        kinds = ("unledgered_mcp_call", "dangling_security_event")
        report = check_session(conn, sample_limit=EVERY_SAMPLE)
        for kind, finding in findings_of(report, *kinds).items():
            assert finding.applicable and finding.failed is None, kind
            assert finding.count == 0, (kind, finding.row_ids)
        query = canned_queries_for(read_schema(conn), "session")["unledgered_mcp_calls"]
        assert conn.execute(query["sql"]).fetchall() == []
    finally:
        conn.close()
    # A tools/call the policy saw with no row in either table is still found.
    writable = sqlite3.connect(copy)
    try:
        row_id = writable.execute(
            "INSERT INTO security_rule_events (timestamp_unix_ms, event_id, event_type, rule_id, "
            "rule_action, rule_json, event_json, trace_id) "
            "VALUES (1781000000000, 'abcdefabcdef', 'mcp.tool_call', 'r', 'allow', '{}', '{}', "
            "'t')"
        ).lastrowid
        writable.commit()
    finally:
        writable.close()
    conn = open_readonly(copy, tmp_path / "cache")
    try:
        report = check_session(conn, sample_limit=EVERY_SAMPLE)
    finally:
        conn.close()
    for kind, finding in findings_of(report, *kinds).items():
        assert finding.row_ids == [row_id], kind


async def test_a_session_without_a_ledger_gets_its_main_db_checks(manifest, catalog, settings):
    stale = next(d for d in manifest["defects"] if d["kind"] == "stale_running")
    report = report_for(stale["session"], catalog, settings)
    assert report.era == "no ledger"
    assert as_entries(report) == {("stale_running", "sessions", None)}
    assert all(not f.applicable for f in report.findings if f.kind == "orphan_tool_response")


async def test_sessions_without_a_ledger_share_one_run_of_the_file_checks(catalog, settings):
    """The checks that judge the file run once per run for the sessions without a ledger
    (`engine._without_a_ledger`): every such session's report, live or not, is the report a
    run of its own gives, for each profile."""
    without = [s for s in catalog.sessions() if s.ledger_path is None]
    assert any(s.live for s in without) and any(not s.live for s in without)
    for profile in ("quick", "full", "rows"):
        memo: dict = {}
        for session in without * 2:
            shared = check_catalog_session(session, settings, profile=profile, memo=memo)
            alone = check_catalog_session(session, settings, profile=profile, memo={})
            assert shared.to_dict() | {"duration_ms": 0} == alone.to_dict() | {"duration_ms": 0}


async def test_live_sessions_soften_what_can_still_change(
    manifest, catalog, settings, capsem_home, cache_dir
):
    orphan = next(d for d in manifest["defects"] if d["kind"] == "orphan_body_blob")
    incomplete = next(d for d in manifest["defects"] if d["kind"] == "exec_incomplete")
    for defect, kind in ((orphan, "orphan_body_blob"), (incomplete, "exec_incomplete")):
        session = catalog.get(defect["session"])
        conn = open_readonly(session.ledger_path, cache_dir)
        try:
            stopped = check_session(conn, session=session, live=False)
            live = check_session(conn, session=session, live=True)
        finally:
            conn.close()
        assert next(f for f in stopped.problems if f.kind == kind).severity != "info"
        found = [f for f in live.findings if f.kind == kind]
        if kind == "orphan_body_blob":
            assert found[0].severity == "warning" and found[0].count == 1
        else:
            assert not found[0].applicable
    running = sample_of(manifest, live=True, clean=True)
    assert report_for(running["id"], catalog, settings).verdict == "ok"


async def test_checking_never_changes_a_byte(capsem_home, catalog, settings):
    before = snapshot_tree(capsem_home)
    for session in catalog.sessions():
        with contextlib.suppress(LedgerUnavailable):
            check_catalog_session(session, settings)
    after = snapshot_tree(capsem_home)
    assert set(after) == set(before), "a file was created or removed"
    # SQLite's reader bookkeeping in an existing -shm is the one write a correct read of a
    # WAL file needs (spec §4.7); database and -wal bytes never change.
    assert all(name.endswith("-shm") for name in before if before[name] != after[name])


# -- the plugin system --------------------------------------------------------------------------


class EvilDomains:
    """An outside plugin: one SQL check with its own finding kind, one check that crashes."""

    @hookimpl
    def capsem_checks(self):
        return [
            SqlCheck(
                id="evil_domain",
                kind="evil_domain",
                severity="error",
                title="Traffic to an exfiltration domain",
                explanation="A request went to a domain on our deny list.",
                table="net_events",
                variants=(
                    SqlVariant(
                        sql="SELECT id FROM net_events WHERE domain = :domain ORDER BY id",
                        requires={"net_events": ("id", "domain")},
                    ),
                ),
                params={"domain": "evil-exfil.example.net"},
            ),
            Crashes(),
        ]


class Crashes(Check):
    id = "crashes"
    kind = "crashes"
    severity = "warning"
    title = "A plugin check with a bug"
    explanation = "Raises on purpose."

    def run(self, ctx: CheckContext) -> list[Finding]:
        raise RuntimeError("plugin bug")


async def test_an_outside_check_registers_through_pluggy(manifest, catalog, settings, capsem_home):
    conn_path = capsem_home / sample_of(manifest, era="head", clean=True)["ledger"]
    plugin = EvilDomains()
    plugin_manager().register(plugin)
    try:
        session = sample_of(manifest, era="head", clean=True)
        report = report_for(session["id"], catalog, settings)
        evil = next(f for f in report.findings if f.kind == "evil_domain")
        conn = open_readonly(conn_path, settings.cache_dir)
        try:
            want = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM net_events WHERE domain = 'evil-exfil.example.net'"
                )
            ]
        finally:
            conn.close()
        assert evil.row_ids == want and evil.count == len(want)
        assert evil.severity == "error" and evil.problem == bool(want)
        crashed = next(f for f in report.findings if f.kind == "crashes")
        assert crashed.failed == "RuntimeError: plugin bug" and crashed.problem
        assert report.verdict in ("error", "warning")
    finally:
        plugin_manager().unregister(plugin)
    after = report_for(sample_of(manifest, era="head", clean=True)["id"], catalog, settings)
    assert not [f for f in after.findings if f.kind in ("evil_domain", "crashes")]


# -- pages ------------------------------------------------------------------------------------


async def test_check_pages_serve_the_same_report(manifest, catalog, settings, datasette):
    defect = next(d for d in manifest["defects"] if d["kind"] == "orphan_tool_response")
    response = await datasette.client.get(f"/-/capsem/sessions/{defect['session']}/check.json")
    assert response.status_code == 200
    data = response.json()
    report = report_for(defect["session"], catalog, settings)
    assert data["verdict"] == report.verdict == "error"
    problems = {(f["kind"], f["table"]) for f in data["findings"] if f["problem"]}
    assert problems == {(f.kind, f.table) for f in report.problems}
    html = await datasette.client.get(f"/-/capsem/sessions/{defect['session']}/check")
    assert html.status_code == 200
    assert "orphan_tool_response" in html.text and "Verdict" in html.text


async def test_check_pages_for_odd_sessions(manifest, datasette):
    stale = next(d for d in manifest["defects"] if d["kind"] == "stale_running")
    response = await datasette.client.get(f"/-/capsem/sessions/{stale['session']}/check.json")
    assert response.status_code == 200 and response.json()["verdict"] == "warning"
    zero = next(b for b in manifest["broken_files"] if b["kind"] == "zero_bytes")
    broken = await datasette.client.get(f"/-/capsem/sessions/{zero['session']}/check")
    assert broken.status_code == 422 and "zero_bytes" in broken.text
    unknown = await datasette.client.get("/-/capsem/sessions/no-such-session/check.json")
    assert unknown.status_code == 404
    hostile = await datasette.client.get("/-/capsem/sessions/%3Cb%3Ex%3C%2Fb%3E/check")
    assert hostile.status_code == 404 and "<b>x</b>" not in hostile.text
    migrated = sample_of(manifest, era="migrated", alias_of=None)
    named = await datasette.client.get(f"/-/capsem/sessions/{migrated['name']}/check")
    assert named.status_code in (200, 302)
