"""`datasette capsem check`: exit status carries the verdict; --json and --all agree with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.findings import KINDS
from datasette_capsem.generate import GenerateOptions, generate_home
from tests.helpers import session_in


@pytest.fixture(scope="module")
def run(capsem_home, tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("check-cli-cache")

    def invoke(*args: str):
        return CliRunner().invoke(
            cli,
            ["capsem", "check", "--home", str(capsem_home), "--cache-dir", str(cache_dir), *args],
            catch_exceptions=False,
        )

    return invoke


def session_with(manifest: dict, severity: str) -> str:
    """A session whose every defect has `severity` (so its verdict is that severity)."""
    by_session: dict[str, set[str]] = {}
    for defect in manifest["defects"]:
        by_session.setdefault(defect["session"], set()).add(KINDS[defect["kind"]].severity.value)
    return next(s for s, found in sorted(by_session.items()) if found == {severity})


def clean(manifest: dict) -> dict:
    return session_in(manifest, has=("clean", "ledger", "era"))


def test_clean_session_exits_0(run, manifest):
    result = run(clean(manifest)["id"])
    assert result.exit_code == 0, result.output
    assert "Verdict: OK" in result.output


def test_error_finding_exits_1_and_lists_rows(run, manifest):
    defect = next(d for d in manifest["defects"] if d["kind"] == "orphan_tool_response")
    result = run(defect["session"])
    assert result.exit_code == 1
    assert "orphan_tool_response" in result.output and str(defect["row_id"]) in result.output
    verbose = run(defect["session"], "-v")
    assert KINDS["orphan_tool_response"].severity.value in verbose.output
    assert "not applicable" in verbose.output or "checks passed" in verbose.output


def test_warnings_alone_exit_0(run, manifest):
    result = run(session_with(manifest, "warning"))
    assert result.exit_code == 0 and "Verdict: WARNING" in result.output


def test_json_report(run, manifest):
    defect = next(d for d in manifest["defects"] if d["kind"] == "blob_hash_mismatch")
    result = run(defect["session"], "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["verdict"] == "error"
    found = [f for f in report["findings"] if f["problem"]]
    assert [(f["kind"], f["row_ids"]) for f in found] == [
        ("blob_hash_mismatch", [defect["row_id"]])
    ]


def test_a_name_resolves_to_its_session(run, manifest):
    named = session_in(manifest, has=("name", "ledger", "clean"))
    result = run(named["name"], "--json")
    assert json.loads(result.stdout)["session"]["id"] == named["id"]


def test_unreadable_or_unknown_sessions_exit_2(run, manifest):
    zero = next(b for b in manifest["broken_files"] if b["kind"] == "zero_bytes")
    result = run(zero["session"])
    assert result.exit_code == 2 and "empty" in result.stderr
    as_json = run(zero["session"], "--json")
    assert json.loads(as_json.stdout)["unreadable"]["kind"] == "zero_bytes"
    unknown = run("no-such-session")
    assert unknown.exit_code == 2 and "unknown session" in unknown.stderr


def test_usage_needs_one_session_or_all(run):
    assert run().exit_code == 2
    assert run("x", "--all").exit_code == 2


def test_all_sessions_summary(run, manifest):
    result = run("--all")
    assert result.exit_code == 2  # the home holds ledgers SQLite cannot read
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["SESSION", "KIND", "ERA", "VERDICT"]
    listed = {line.split()[0] for line in lines[1:] if line and "sessions:" not in line}
    assert {s["id"] for s in manifest["sessions"]} <= listed
    assert "Checking sessions" in result.stderr

    document = json.loads(run("--all", "--json", "--workers", "1").stdout)
    verdicts = {d["session"]["id"]: d["verdict"] for d in document["sessions"]}
    for broken in manifest["broken_files"]:
        if broken["kind"] in ("zero_bytes", "not_sqlite", "truncated"):
            assert verdicts[broken["session"]] == "unreadable"
    for defect in manifest["defects"]:
        if KINDS[defect["kind"]].severity.value == "error":
            assert verdicts[defect["session"]] == "error"
    assert sum(document["summary"].values()) == len(document["sessions"])


def test_all_without_broken_files_exits_1_on_errors(tmp_path: Path):

    home = tmp_path / "home"
    generate_home(home, GenerateOptions(seed=5, hostile=False, broken=False))
    result = CliRunner().invoke(
        cli,
        ["capsem", "check", "--all", "--home", str(home), "--cache-dir", str(tmp_path / "c")],
    )
    assert result.exit_code == 1, result.output


def test_all_prints_errors_first_and_problems_only_leaves_out_the_sound(run, manifest):
    order = {"unreadable": 0, "error": 1, "warning": 2, "ok": 3}
    result = run("--all", "--problems-only")
    assert result.exit_code == 2
    lines = [line for line in result.stdout.splitlines()[1:] if line.strip()]
    rows = [line.split() for line in lines if "sessions:" not in line]
    verdicts = [next(w for w in row if w in order) for row in rows]
    assert verdicts and "ok" not in verdicts
    assert [order[v] for v in verdicts] == sorted(order[v] for v in verdicts)
    assert "ok not shown" in lines[-1]
    every = run("--all", "--json", "--workers", "1")
    document = json.loads(every.stdout)
    ranks = [order[d["verdict"]] for d in document["sessions"]]
    assert ranks == sorted(ranks)  # errors first in full too
    problems = json.loads(run("--all", "--json", "--problems-only").stdout)
    assert {d["session"]["id"] for d in problems["sessions"]} == {
        d["session"]["id"] for d in document["sessions"] if d["verdict"] != "ok"
    }
    assert run(clean(manifest)["id"], "--problems-only").exit_code == 2  # goes with --all
