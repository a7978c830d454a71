"""Many Capsem homes in one instance: labels, colliding ids, the chooser, the home filter and
facet, the index across homes, and homes that come, go or arrive half-copied while serving."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog
from datasette_capsem.catalog.resolve import resolve_name
from datasette_capsem.config import ConfigError, load_settings, qualify, split_qualified
from datasette_capsem.state import get_state
from tests.helpers import doc_section, make_labelled_datasette
from tests.test_serve_cli import free_port, wait_for

aio = pytest.mark.asyncio(loop_scope="session")
COLLIDING = "co-work-2"  # a legacy name-keyed id both generated homes have


def homes_config(root: Path) -> dict:
    return {
        "homes": [
            {"label": "alpha", "path": str(root / "alpha")},
            {"label": "beta", "path": str(root / "beta")},
        ]
    }


def manifest_ids(home: Path) -> set[str]:
    return {s["id"] for s in json.loads((home / "manifest.json").read_text())["sessions"]}


@pytest.fixture(scope="module")
def unique_id(homes_dir) -> str:
    """An id only `alpha` has."""
    return sorted(manifest_ids(homes_dir / "alpha") - manifest_ids(homes_dir / "beta"))[0]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def served(homes_dir, tmp_path_factory):
    datasette = await make_labelled_datasette(
        tmp_path_factory.mktemp("homes-cache"), **homes_config(homes_dir)
    )
    state = get_state(datasette)
    state.index.refresh()  # as the background refresh would
    return datasette


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["", "a--b", "-a", "a-", "a b", "a/b", "é", "x" * 65, 7, None])
def test_a_bad_label_is_a_config_error_naming_it(tmp_path, label):
    with pytest.raises(ConfigError, match="label"):
        load_settings({"homes": [{"label": label, "path": str(tmp_path)}]})


def test_labels_are_unique_and_exclusive_of_capsem_home(tmp_path):
    twice = [{"label": "a", "path": str(tmp_path)}, {"label": "a", "path": str(tmp_path / "b")}]
    with pytest.raises(ConfigError, match="'a' is given twice"):
        load_settings({"homes": twice})
    with pytest.raises(ConfigError, match="either capsem_home"):
        load_settings({"homes": twice[:1], "capsem_home": str(tmp_path)})


def test_an_address_splits_at_its_first_separator_whatever_the_id():
    for label in ("alpha", "mac-1", "a.b_c"):
        for session_id in ("co-work-2", "x--y", "--", "main", "20260305-142000-616e"):
            assert split_qualified(qualify(label, session_id)) == (label, session_id)
    assert split_qualified("co-work-2") is None and split_qualified("bad--") is None


def test_a_homes_dir_child_with_a_bad_name_is_left_out_with_a_problem(homes_dir, tmp_path):
    root = tmp_path / "homes"
    root.mkdir()
    (root / "alpha").symlink_to(homes_dir / "alpha")
    (root / "bad name").mkdir()
    (root / "a-file").write_text("not a home")
    catalog = Catalog(load_settings({"homes_dir": str(root), "cache_dir": str(tmp_path / "c")}))
    snapshot = catalog.snapshot()
    assert list(snapshot.homes) == ["alpha"]
    assert any("bad name" in p and "left out" in p for p in snapshot.problems)
    assert {s.home for s in snapshot.sessions.values()} == {"alpha"}


# -- identity and resolution -----------------------------------------------------------------


def test_colliding_ids_are_never_shadowed(homes_dir, tmp_path, unique_id):
    settings = load_settings({**homes_config(homes_dir), "cache_dir": str(tmp_path)})
    catalog = Catalog(settings)
    sessions = catalog.snapshot().sessions
    for label in ("alpha", "beta"):
        wanted = {qualify(label, i) for i in manifest_ids(homes_dir / label)}
        assert wanted <= set(sessions), label
    both = resolve_name(catalog, COLLIDING)
    assert both.ambiguous and both.id is None
    assert {c["id"] for c in both.candidates} >= {"alpha--co-work-2", "beta--co-work-2"}
    assert {c["home"] for c in both.candidates} == {"alpha", "beta"}
    assert resolve_name(catalog, unique_id).id == qualify("alpha", unique_id)
    assert resolve_name(catalog, f"beta:{COLLIDING}").id == "beta--co-work-2"
    assert resolve_name(catalog, "beta--co-work-2").id == "beta--co-work-2"


@aio
async def test_a_bare_colliding_id_is_a_chooser_in_html_and_json(served):
    for path in (f"/-/capsem/sessions/{COLLIDING}", f"/-/capsem/resolve?name={COLLIDING}"):
        page = await served.client.get(path)
        assert page.status_code == 300, path
        for label in ("alpha", "beta"):
            assert f'href="/-/capsem/sessions/{label}--{COLLIDING}' in page.text, (path, label)
    chosen = await served.client.get(f"/-/capsem/sessions/{COLLIDING}.json")
    assert chosen.status_code == 300
    offered = {s["home"]: s["href"] for s in chosen.json()["suggestions"]}
    assert offered == {label: f"/-/capsem/sessions/{label}--{COLLIDING}.json" for label in offered}
    assert set(offered) == {"alpha", "beta"}
    resolved = await served.client.get(f"/-/capsem/resolve.json?name={COLLIDING}")
    assert resolved.status_code == 300
    assert {c["home"] for c in resolved.json()["candidates"]} == {"alpha", "beta"}


@aio
async def test_a_bare_id_of_one_home_redirects_to_its_address(served, unique_id):
    response = await served.client.get(f"/-/capsem/sessions/{unique_id}/check")
    assert response.status_code == 302
    assert response.headers["location"] == f"/-/capsem/sessions/alpha--{unique_id}/check"
    for label in ("alpha", "beta"):
        page = await served.client.get(f"/-/capsem/sessions/{label}--{COLLIDING}.json")
        assert page.status_code == 200, label
        assert page.json()["session"]["home"] == label


@aio
async def test_each_homes_main_db_is_mounted_under_its_label(served):
    for label in ("alpha", "beta"):
        rows = await served.client.get(f"/{label}--main/sessions.json?_shape=array&_size=max")
        assert rows.status_code == 200, label
        assert COLLIDING in {row["id"] for row in rows.json()}
    assert (await served.client.get("/main")).status_code == 404


def run_cli(*args: str):
    return CliRunner().invoke(cli, ["capsem", *args])


def test_cli_addresses_and_ambiguity(homes_dir, tmp_path, unique_id):
    where = [
        "--home",
        f"alpha={homes_dir / 'alpha'}",
        "--home",
        f"beta={homes_dir / 'beta'}",
        "--cache-dir",
        str(tmp_path),
    ]
    ambiguous = run_cli("resolve", COLLIDING, *where)
    assert ambiguous.exit_code == 2
    assert "ambiguous:" in ambiguous.output
    assert {"alpha--co-work-2", "beta--co-work-2"} <= set(ambiguous.output.split())
    assert run_cli("resolve", f"beta:{COLLIDING}", *where).output.strip() == "beta--co-work-2"
    assert run_cli("resolve", unique_id, *where).output.strip() == f"alpha--{unique_id}"
    checked = run_cli("check", COLLIDING, *where)
    assert checked.exit_code == 2 and "ambiguous:" in checked.output
    bad = run_cli("resolve", COLLIDING, "--home", f"a--b={homes_dir / 'alpha'}")
    assert bad.exit_code == 2 and "'a--b'" in bad.output and "Traceback" not in bad.output
    mixed = run_cli("resolve", COLLIDING, "--home", str(homes_dir / "alpha"), *where[:2])
    assert mixed.exit_code == 2 and "LABEL=PATH" in mixed.output
    listed = run_cli(
        "list",
        "--homes-dir",
        str(homes_dir),
        "--cache-dir",
        str(tmp_path),
        "--json",
        "--all",
        "-n",
        "1000",
    )
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["sessions"]
    assert {row["home"] for row in rows} == {"alpha", "beta"}


# -- the list, its filter and facet, the index -------------------------------------------------


@aio
async def test_the_list_shows_filters_and_facets_by_home(served):
    every = (await served.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
    homes = [row["home"] for row in every["sessions"]]
    facet = {f["value"]: f["count"] for f in every["facets"]["home"]}
    assert facet == {label: homes.count(label) for label in ("alpha", "beta")}
    assert all(row["id"] == qualify(row["home"], row["local_id"]) for row in every["sessions"])
    beta = (await served.client.get("/-/capsem/sessions.json?_size=max&all=1&home=beta")).json()
    assert beta["filtered"] == facet["beta"] and beta["filters"]["home"] == ["beta"]
    assert {row["home"] for row in beta["sessions"]} == {"beta"}
    assert [f["selected"] for f in beta["facets"]["home"]] == [True]
    page = (await served.client.get("/-/capsem?all=1")).text
    assert "<th><a" in page and ">Home</a>" in page
    assert 'href="/-/capsem?home=alpha"' in page and 'href="/-/capsem?home=beta"' in page
    assert f'href="/-/capsem/sessions/beta--{COLLIDING}"' in page
    chart = await served.client.get("/-/capsem/charts/sessions.json?home=alpha")
    counted = sum(row["sessions"] for row in chart.json()["rows"])
    alpha_listed = await served.client.get("/-/capsem/sessions.json?_size=max&home=alpha")
    assert counted == alpha_listed.json()["filtered"]


@aio
async def test_the_index_keys_sessions_by_home_and_id(served):
    rows = await served.client.get(
        "/index/ledgers.json?_shape=array&_size=max&session_id__endswith=--" + COLLIDING
    )
    assert {(r["home"], r["session_id"]) for r in rows.json()} == {
        (label, f"{label}--{COLLIDING}") for label in ("alpha", "beta")
    }
    facet = (await served.client.get("/index/session_checks.json?_facet=home")).json()
    facets = facet["facet_results"]
    facets = facets.get("results", facets)  # 1.0 nests them in "results"
    counted = {f["value"]: f["count"] for f in facets["home"]["results"]}
    assert set(counted) == {"alpha", "beta"}
    findings = await served.client.get("/-/capsem/findings.json")
    assert findings.status_code == 200


# -- homes that come and go, and files mid-copy ------------------------------------------------


@pytest.fixture
def live_homes(homes_dir, tmp_path) -> Path:
    """A private homes_dir holding a copy of `alpha` (tests change it while serving)."""
    root = tmp_path / "homes"
    shutil.copytree(homes_dir / "alpha", root / "alpha", symlinks=True)
    return root


async def fresh(datasette):
    get_state(datasette).catalog.refresh(force=True)


@aio
async def test_a_home_added_removed_and_back_at_runtime(live_homes, homes_dir, tmp_path):
    datasette = await make_labelled_datasette(tmp_path / "cache", homes_dir=str(live_homes))
    state = get_state(datasette)
    state.catalog.min_check_interval = 0
    first = (await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
    assert {row["home"] for row in first["sessions"]} == {"alpha"}
    link = f"/-/capsem/sessions/alpha--{COLLIDING}.json"
    assert (await datasette.client.get(link)).status_code == 200
    shutil.copytree(homes_dir / "beta", live_homes / "beta", symlinks=True)  # a new machine syncs
    added = (await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
    assert {row["home"] for row in added["sessions"]} == {"alpha", "beta"}
    assert (await datasette.client.get(link)).status_code == 200  # its address kept its meaning
    assert (await datasette.client.get(f"/-/capsem/sessions/{COLLIDING}")).status_code == 300
    table = f"/beta--{COLLIDING}/model_calls.json"
    assert (await datasette.client.get(table)).status_code == 200  # mounted in Datasette
    (live_homes / "beta").rename(tmp_path / "beta-away")  # the sync removes it for a while
    gone = await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")
    assert gone.status_code == 200
    beta = {h["label"]: h for h in gone.json()["homes"]}["beta"]
    assert beta["available"] is False and beta["unavailable_since"]
    assert {row["home"] for row in gone.json()["sessions"]} == {"alpha"}
    page = await datasette.client.get("/-/capsem")
    assert f"unavailable since {beta['unavailable_since']}" in page.text
    away = await datasette.client.get(f"/-/capsem/sessions/beta--{COLLIDING}")
    assert away.status_code == 503 and "unavailable since" in away.text
    assert (await datasette.client.get(link)).status_code == 200  # the rest keeps serving
    mounted = await datasette.client.get(table)  # its ledger was mounted: gone, never a 500
    assert mounted.status_code in (404, 422, 503), mounted.text[:300]
    (tmp_path / "beta-away").rename(live_homes / "beta")
    back = await datasette.client.get(f"/-/capsem/sessions/beta--{COLLIDING}.json")
    assert back.status_code == 200


def a_ledger(home: Path) -> tuple[str, Path]:
    """(id, path) of a finished WAL-less ledger of a generated home."""
    manifest = json.loads((home / "manifest.json").read_text())
    for session in manifest["sessions"]:
        path = home / (session.get("ledger") or "missing")
        finished = session.get("clean") and not session.get("live")
        if finished and path.suffix == ".db" and not Path(f"{path}-wal").exists():
            return session["id"], path
    raise AssertionError("no finished ledger in the generated home")


@aio
async def test_a_half_copied_or_renamed_ledger_is_a_clear_state(live_homes, tmp_path):
    datasette = await make_labelled_datasette(tmp_path / "cache", homes_dir=str(live_homes))
    session_id, ledger = a_ledger(live_homes / "alpha")
    address = f"/-/capsem/sessions/alpha--{session_id}"
    whole = ledger.read_bytes()
    ok = await datasette.client.get(address + ".json")
    assert ok.status_code == 200
    ledger.write_bytes(whole[: len(whole) // 2])  # the copy has reached half the file
    half = await datasette.client.get(address)
    assert half.status_code == 200 and "copy in progress" in half.text  # said, no figure
    checked = await datasette.client.get(address + "/check")
    assert checked.status_code == 422 and "copy in progress" in checked.text
    assert (await datasette.client.get("/-/capsem")).status_code == 200
    ledger.write_bytes(whole[:60])  # cut inside the header
    assert "copy in progress" in (await datasette.client.get(address + "/check")).text
    staged = ledger.with_name(".session.db.partial")
    staged.write_bytes(whole)
    os.replace(staged, ledger)  # rsync's way: the finished copy is renamed over the old one
    again = await datasette.client.get(address + ".json")
    assert again.status_code == 200 and again.json()["problem"] is None

    def figures(page) -> dict:  # the integrity report carries its own timings
        return {key: value for key, value in page.json().items() if key != "integrity"}

    assert figures(again) == figures(ok)
    main_db = live_homes / "alpha" / "sessions" / "main.db"
    main_db.write_bytes(main_db.read_bytes()[:4096])  # main.db half-copied too
    await fresh(datasette)
    listing = await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")
    assert listing.status_code == 200
    assert any("alpha: main.db" in p and "truncated" in p for p in listing.json()["problems"])
    main_page = await datasette.client.get("/alpha--main/sessions")
    assert main_page.status_code == 422 and "copy in progress" in main_page.text


def test_a_file_that_grows_while_read_is_a_copy_in_progress(tmp_path):
    """A copy appending to a WAL-less file while it is inspected: the two stats around the
    header read disagree, and the file is reported as a copy in progress, never opened."""
    target = tmp_path / "session.db"
    conn = sqlite3.connect(target)
    conn.execute("create table t (x)")
    conn.commit()
    conn.close()
    stop = threading.Event()

    def copying() -> None:
        with open(target, "ab") as out:
            while not stop.is_set():
                out.write(b"\0" * 512)
                out.flush()

    writer = threading.Thread(target=copying)
    writer.start()
    seen = set()
    try:
        for _ in range(20000):  # bounds a hang only: the first straddled append ends it
            try:
                readonly.inspect_file(target)
            except readonly.LedgerUnavailable as problem:
                seen.add(problem.kind)
                if problem.kind == "copying":
                    assert "copy in progress" in problem.detail
                    break
    finally:
        stop.set()
        writer.join()
    assert seen == {"copying"}


@aio
async def test_search_spans_every_home(served):
    by_id = (await served.client.get(f"/-/capsem/search.json?q={COLLIDING}")).json()
    found = {s["home"] for s in by_id["sessions"] if s["match"] == "id"}
    assert found == {"alpha", "beta"}
    words = (await served.client.get("/-/capsem/search.json?q=error")).json()["text"]["hits"]
    homes = {hit["session_id"].partition("--")[0] for hit in words}
    assert homes == {"alpha", "beta"}


# -- the README's "Many homes" section, as written -------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
SECTION = doc_section("Many homes in one instance")
DATASETTE = str(Path(sys.executable).with_name("datasette"))


def test_the_readme_homes_config_is_valid():
    (block,) = re.findall(r"```yaml\n(.*?)```", SECTION, re.S)
    config = yaml.safe_load(block)["plugins"]["datasette-capsem"]
    settings = load_settings(config)
    assert [home.label for home in settings.homes] == ["laptop-7", "ci"]
    assert settings.homes_dir == Path("/srv/capsem/synced")


def readme_commands() -> list[str]:
    (block,) = re.findall(r"```bash\n(.*?)```", SECTION, re.S)
    return [line.strip() for line in block.splitlines() if line.strip()]


def in_readme_dir(homes_dir: Path, tmp_path: Path) -> dict:
    (tmp_path / "homes").symlink_to(homes_dir)
    return {
        **os.environ,
        "DATASETTE_CAPSEM_CACHE": str(tmp_path / "cache"),
        "HOME": str(tmp_path / "user"),
        "PYTHONPATH": str(ROOT),
    }


@pytest.mark.parametrize("command", readme_commands())
def test_readme_homes_example_runs_as_written(command, homes_dir, tmp_path):
    argv = [DATASETTE, *shlex.split(command)[1:]]
    env = in_readme_dir(homes_dir, tmp_path)
    result = subprocess.run(
        argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert "Traceback" not in result.stderr, result.stderr
    if argv[2:4] == ["resolve", COLLIDING]:  # a bare id two homes have
        assert result.returncode == 2 and "ambiguous:" in result.stderr
        assert {"alpha--co-work-2", "beta--co-work-2"} <= set(result.stderr.split())
    elif argv[2] == "resolve":
        assert result.returncode == 0 and result.stdout.strip() == "beta--co-work-2"
    elif argv[2] == "check":
        assert result.returncode in (0, 1) and "Verdict:" in result.stdout, result.stderr
    else:
        assert result.returncode == 0, result.stderr
        rows = json.loads(result.stdout)["sessions"]
        assert {row["home"] for row in rows} == {"alpha", "beta"}


def run_server(args: list[str], env: dict, cwd: Path):
    port = free_port()
    process = subprocess.Popen(
        [DATASETTE, "capsem", *args, "--port", str(port)],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, f"http://127.0.0.1:{port}"


def test_readme_serve_homes_dir_runs_as_written(homes_dir, tmp_path):
    (command,) = set(re.findall(r"`(datasette capsem serve --homes-dir [^`]+)`", SECTION))
    env = in_readme_dir(homes_dir, tmp_path)
    process, base = run_server(shlex.split(command)[2:], env, cwd=tmp_path)
    try:
        page = wait_for(base + f"/-/capsem/sessions/{COLLIDING}", process)
        assert page.status_code == 300 and "beta--co-work-2" in page.text
    finally:
        process.terminate()
        process.wait(timeout=30)


@aio
async def test_each_homes_path_is_hidden_from_masked_readers(served, homes_dir):
    answer = await served.client.get("/-/capsem/sessions.json?_size=1")
    assert str(homes_dir) not in answer.text
    paths = {home["label"]: home["path"] for home in answer.json()["homes"]}
    assert paths == {"alpha": "$CAPSEM_HOME[alpha]", "beta": "$CAPSEM_HOME[beta]"}
