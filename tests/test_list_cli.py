"""`datasette capsem list`, and what every command does with a bad home, an ambiguous session
and an id prefix: real generated homes, the real CLI and real HTTP, no mocks."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.state import get_state
from tests.helpers import make_datasette, session_in
from tests.test_resolve import by_name

ASYNC = pytest.mark.asyncio(loop_scope="session")

# (CLI flags, the same filters as sessions.json parameters)
FILTERS = [
    ([], ""),
    (["--all"], "all=1"),
    (["--with-db"], "with_db=1"),
    (["--with-model", "--with-tools"], "with_model=1&with_tools=1"),
    (["--with-net", "--min-cost", "0.05"], "with_net=1&min_cost=0.05"),
    (["--all", "--has-errors"], "all=1&has_errors=1"),
    (["--name", "tour"], "q=tour"),
]


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(cli, ["capsem", *args], env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def list_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("list-cli-cache")


def listed(home: Path, cache: Path, *args: str) -> dict:
    result = invoke("list", "--home", str(home), "--cache-dir", str(cache), "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@ASYNC
async def test_the_cli_json_is_the_web_lists_json(capsem_home, list_cache):
    first = listed(capsem_home, list_cache, "-n", "1000")  # refreshes the index in list_cache
    assert first["total"] > 20 and len(first["sessions"]) == first["filtered"]
    datasette = await make_datasette(capsem_home, list_cache)
    get_state(datasette).index.refresh()
    for flags, params in FILTERS:
        cli_answer = listed(capsem_home, list_cache, "--no-refresh", "-n", "1000", *flags)
        response = await datasette.client.get(f"/-/capsem/sessions.json?_size=max&{params}")
        assert response.status_code == 200, response.text[:300]
        web = response.json()
        assert cli_answer["filtered"] == web["filtered"], flags
        assert cli_answer["total"] == web["total"]
        assert cli_answer["filters"] == web["filters"], flags
        assert cli_answer["sessions"] == web["sessions"], flags
    some = listed(capsem_home, list_cache, "--no-refresh", "--all", "--has-errors")
    assert some["sessions"] and all(
        r["verdict"]["errors"] or r["verdict"]["state"] == "unreadable" for r in some["sessions"]
    )


def test_the_table_has_the_figures_and_n_limits_it(capsem_home, list_cache):
    result = invoke("list", "--home", str(capsem_home), "--cache-dir", str(list_cache), "-n", "3")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "STATUS",
        "CREATED",
        "VERDICT",
        "TOKENS",
        "COST",
        "REQS",
        "TOOLS",
    ]
    rows = listed(capsem_home, list_cache, "--no-refresh", "-n", "3")["sessions"]
    assert len(rows) == 3
    for line, row in zip(lines[1:4], rows, strict=True):
        assert line.startswith(row["id"])
        if row["tokens"]:
            assert f"{row['tokens']:,}" in line
    assert lines[-1].startswith("3 of ")


def test_bad_list_values_exit_2_in_one_line(capsem_home, list_cache):
    where = ["--home", str(capsem_home), "--cache-dir", str(list_cache)]
    result = invoke("list", *where, "--min-cost", "nan")
    assert result.exit_code == 2 and "min_cost" in result.output
    assert "Traceback" not in result.output


# -- a home that is not there ----------------------------------------------------------------

COMMANDS = [
    ["list"],
    ["index"],
    ["check", "--all"],
    ["check", "co-work-1"],
    ["resolve", "co-work-1"],
    ["export-otlp", "co-work-1"],
    ["push-otlp", "--endpoint", "http://127.0.0.1:9/v1/traces"],
    ["tail", "co-work-1"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_missing_or_wrong_home_exits_2_from_every_command(command, tmp_path):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    (tmp_path / "not-a-home").mkdir()
    for home, why in (
        (tmp_path / "missing", "does not exist"),
        (tmp_path / "not-a-home", "is not a Capsem home"),
    ):
        result = invoke(*command, "--home", str(home), *cache)
        assert result.exit_code == 2, (command, result.output)
        assert f"no Capsem home: {home} (from --home) {why}" in result.output
        assert "Traceback" not in result.output and "0 sessions" not in result.output
    env = {"CAPSEM_HOME": str(tmp_path / "missing")}
    result = invoke(*command, *cache, env=env)
    assert result.exit_code == 2 and "(from $CAPSEM_HOME) does not exist" in result.output


def test_serve_with_a_capsem_home_that_is_not_there_exits_2_not_the_demo(tmp_path):
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "CAPSEM_HOME": str(tmp_path / "missing"),
    }
    datasette = Path(sys.executable).with_name("datasette")
    result = subprocess.run(
        [str(datasette), "capsem", "serve", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "(from $CAPSEM_HOME) does not exist" in result.stderr
    assert "demo" not in result.stderr.split("does not exist")[0]
    assert not (tmp_path / "cache" / "datasette-capsem").exists()  # no demo home written
    metadata = tmp_path / "metadata.yml"
    metadata.write_text(f"plugins:\n  datasette-capsem:\n    capsem_home: {tmp_path / 'gone'}\n")
    env.pop("CAPSEM_HOME")
    result = subprocess.run(
        [str(datasette), "capsem", "serve", "-m", str(metadata)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert f"(from capsem_home in {metadata}) does not exist" in result.stderr


def test_export_to_a_file_says_what_it_wrote_on_stderr(capsem_home, tmp_path):
    target = tmp_path / "out.json"
    where = ["--home", str(capsem_home), "--cache-dir", str(tmp_path / "c")]
    result = invoke("export-otlp", "co-work-1", *where, "-o", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    document = json.loads(target.read_text())
    spans = sum(
        len(scope["spans"])
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
    )
    traces = len(
        {
            span["traceId"]
            for resource in document["resourceSpans"]
            for scope in resource["scopeSpans"]
            for span in scope["spans"]
        }
    )
    assert spans and f"wrote {spans} spans of {traces} traces" in result.stderr
    assert str(target) in result.stderr


def test_export_into_a_missing_directory_is_a_clear_error(capsem_home, tmp_path):
    target = tmp_path / "nowhere" / "out.json"
    result = invoke(
        "export-otlp",
        "co-work-1",
        "--home",
        str(capsem_home),
        "--cache-dir",
        str(tmp_path / "c"),
        "-o",
        str(target),
    )
    assert result.exit_code == 2
    assert f"the directory {target.parent} does not exist" in result.output
    assert "Traceback" not in result.output


# -- ambiguous names and id prefixes ---------------------------------------------------------

PREFIX = "abcdef12"


@pytest.fixture(scope="module")
def prefixed_home(capsem_home, tmp_path_factory) -> tuple[Path, list[str]]:
    """A copy of the generated home whose main.db also has two sessions sharing an 8-character
    id prefix (copies of an existing row)."""
    home = tmp_path_factory.mktemp("prefix-home") / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    ids = [f"{PREFIX}-0000-4000-8000-00000000000{n}" for n in (1, 2)]
    conn = sqlite3.connect(home / "sessions" / "main.db")
    try:
        source = conn.execute("SELECT id FROM sessions WHERE status = 'stopped' LIMIT 1").fetchone()
        for new_id in ids:
            conn.execute("CREATE TEMP TABLE copy AS SELECT * FROM sessions WHERE id = ?", source)
            conn.execute("UPDATE copy SET id = ?", (new_id,))
            conn.execute("INSERT INTO sessions SELECT * FROM copy")
            conn.execute("DROP TABLE copy")
        conn.commit()
    finally:
        conn.close()
    return home, ids


def test_an_ambiguous_name_or_prefix_exits_2_with_the_candidates_everywhere(
    prefixed_home, manifest, tmp_path
):
    home, ids = prefixed_home
    where = ["--home", str(home), "--cache-dir", str(tmp_path / "c")]
    # (`code-3`, a /run id and a VM's name, is no longer ambiguous: the id wins, see
    # test_cli_an_exact_id_wins_and_the_named_session_is_mentioned.)
    for text, expected in ((PREFIX, set(ids)),):
        for command in (["check"], ["resolve"], ["export-otlp"]):
            result = invoke(*command, text, *where)
            assert result.exit_code == 2, (command, text, result.output)
            assert "several sessions match" in result.stderr, (command, text)
            assert expected <= set(result.stderr.split()), (command, text)
            assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["check", "tail", "resolve", "export-otlp"])
def test_an_unknown_session_exits_2_from_every_command(command, capsem_home, tmp_path):
    """`check`/`tail` exited 2 and `resolve`/`export-otlp` 1: one code, 2, like a bad home."""
    where = ["--home", str(capsem_home), "--cache-dir", str(tmp_path / "c")]
    result = invoke(command, "no-such-session", *where)
    assert result.exit_code == 2, (command, result.output)
    assert "unknown session name or id: 'no-such-session'" in result.stderr


@pytest.mark.parametrize("name", ["code-3", "code-vm1"])
def test_cli_an_exact_id_wins_and_the_named_session_is_mentioned(
    capsem_home, manifest, tmp_path, name
):
    """`check code-vm1` used to say "ambiguous… use one of these ids: code-vm1" and the
    suggested id gave the same answer: a dead end."""
    where = ["--home", str(capsem_home), "--cache-dir", str(tmp_path / "c")]
    (other,) = [s["id"] for s in by_name(manifest, name) if s["id"] != name]
    result = CliRunner().invoke(cli, ["capsem", "resolve", name, *where])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == name
    assert other in result.stderr and "also the name" in result.stderr
    checked = CliRunner().invoke(cli, ["capsem", "check", name, "--json", *where])
    assert checked.exit_code in (0, 1), checked.output
    assert json.loads(checked.stdout)["session"]["id"] == name


def test_a_unique_id_prefix_is_accepted_by_every_command(capsem_home, manifest, tmp_path):
    where = ["--home", str(capsem_home), "--cache-dir", str(tmp_path / "c")]
    session = session_in(manifest, name="co-work-1")
    prefix = session["id"][:8]
    assert invoke("resolve", prefix, *where).stdout.strip() == session["id"]
    checked = invoke("check", prefix, "--json", *where)
    assert (
        checked.exit_code in (0, 1) and json.loads(checked.stdout)["session"]["id"] == session["id"]
    )
    exported = invoke("export-otlp", prefix, *where)
    assert exported.exit_code == 0 and json.loads(exported.stdout)["resourceSpans"]
    short = invoke("resolve", session["id"][:7], *where)
    assert short.exit_code == 2  # fewer than 8 characters is no prefix: unknown


@ASYNC
async def test_a_url_prefix_redirects_and_an_ambiguous_one_offers_a_choice(
    prefixed_home, manifest, tmp_path
):
    home, ids = prefixed_home
    datasette = await make_datasette(home, tmp_path / "c")
    session = session_in(manifest, name="co-work-1")
    response = await datasette.client.get(f"/-/capsem/sessions/{session['id'][:8]}/check?x=1")
    assert response.status_code == 302
    assert response.headers["location"] == f"/-/capsem/sessions/{session['id']}/check?x=1"
    chooser = await datasette.client.get(f"/-/capsem/sessions/{PREFIX}/check")
    assert chooser.status_code == 300
    for session_id in ids:
        assert f'href="/-/capsem/sessions/{session_id}/check"' in chooser.text
    as_json = await datasette.client.get(f"/-/capsem/sessions/{PREFIX}.json")
    assert as_json.status_code == 300
    assert {s["id"] for s in as_json.json()["suggestions"]} == set(ids)
    short = await datasette.client.get(f"/-/capsem/sessions/{PREFIX[:7]}")
    assert short.status_code == 404


# -- the README's command-line examples, as written ------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def documented() -> list[str]:
    text = (ROOT / "docs" / "cli.md").read_text()
    (block,) = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_the_readme_documents_list_with_its_flags():
    commands = documented()
    assert any(c.startswith("datasette capsem list") and "--json" in c for c in commands)
    assert any("--min-cost" in c and "-n" in c for c in commands)


@pytest.mark.parametrize("command", documented())
def test_readme_cli_example_runs_as_written(command, capsem_home, tmp_path):
    argv = shlex.split(command)
    assert argv[:2] == ["datasette", "capsem"]
    argv[0] = str(Path(sys.executable).with_name("datasette"))
    env = {
        **os.environ,
        "CAPSEM_HOME": str(capsem_home),
        "DATASETTE_CAPSEM_CACHE": str(tmp_path / "cache"),
    }
    result = subprocess.run(
        argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in result.stderr, result.stderr
    if argv[2] == "check":  # the tour session's unanswered call is a finding, not an error
        assert result.returncode in (0, 1), result.stderr
        assert "Verdict:" in result.stdout
        return
    assert result.returncode == 0, result.stderr
    if argv[2] == "list" and "--json" in argv:
        answer = json.loads(result.stdout)
        assert answer["sessions"] and answer["filters"] == {"all": True, "has_errors": True}
    elif argv[2] == "list":
        assert result.stdout.split()[:3] == ["ID", "NAME", "STATUS"]
    elif argv[2] == "resolve":
        assert len(result.stdout.strip()) == 36  # a UUID
    elif argv[2] == "export-otlp":
        target = tmp_path / argv[argv.index("-o") + 1]
        assert json.loads(target.read_text())["resourceSpans"]
