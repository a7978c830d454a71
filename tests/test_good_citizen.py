"""A good citizen of Datasette (issue 26): where nothing asks for a Capsem home, the plugin
leaves Datasette as it is; beside a Capsem home, the user's databases keep their names, pages
and other plugins, and the plugin's headers stay on Capsem's pages."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from datasette.app import Datasette

from datasette_capsem.permissions import DATASETTE_1
from tests.browser import live_server, open_page
from tests.helpers import PLUGIN, snapshot_tree
from tests.security_support import stop
from tests.test_serve_cli import free_port, wait_for

pytestmark = pytest.mark.asyncio(loop_scope="session")

DATASETTE = Path(sys.executable).with_name("datasette")
# The plugin's security headers (core_pages/lazy_mount.SECURITY_HEADERS and the CSP). Datasette
# sets none of them itself, but for its own `Referrer-Policy: no-referrer` on some pages.
OUR_HEADERS = {
    "content-security-policy": None,
    "x-frame-options": None,
    "x-content-type-options": None,
    "referrer-policy": "same-origin",
}


def ours(response) -> dict[str, str]:
    """The plugin's headers a response carries."""
    return {
        name: response.headers[name]
        for name, value in OUR_HEADERS.items()
        if name in response.headers and value in (None, response.headers[name])
    }


def own_databases(root: Path) -> tuple[Path, Path]:
    """`other.db` (a `places` table with latitude/longitude, as datasette-cluster-map wants)
    and `mine/main.db` (a `notes` table): a user's own files, one named like Capsem's main."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "mine").mkdir(exist_ok=True)
    other, main = root / "other.db", root / "mine" / "main.db"
    with sqlite3.connect(other) as db:
        db.execute(
            "create table places (id integer primary key, name text, latitude real, longitude real)"
        )
        db.executemany(
            "insert into places values (?, ?, ?, ?)",
            [(1, "Paris", 48.85, 2.35), (2, "Lyon", 45.76, 4.84)],
        )
    with sqlite3.connect(main) as db:
        db.execute("create table notes (id integer primary key, body text)")
        db.execute("insert into notes values (1, 'a note of mine')")
    return other, main


def databases_of(answer) -> list[dict]:
    """`/-/databases.json`: a list on Datasette 0.65, `{"databases": [...]}` on 1.0."""
    found = answer.json()
    return found["databases"] if isinstance(found, dict) else found


def database_names(answer) -> set[str]:
    return {database["name"] for database in databases_of(answer)}


@pytest.mark.asyncio(loop_scope="session")
async def test_datasette_serve_of_own_databases_without_a_home_is_datasette_as_it_is(tmp_path):
    """`datasette serve other.db mine/main.db`, nothing configured, no Capsem home anywhere."""
    other, main = own_databases(tmp_path / "data")
    user, cache = tmp_path / "user", tmp_path / "xdg-cache"
    user.mkdir()
    cache.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAPSEM_", "DATASETTE_"))}
    env.update(HOME=str(user), XDG_CACHE_HOME=str(cache))
    port = free_port()
    process = subprocess.Popen(
        [str(DATASETTE), "serve", str(other), str(main), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(base + "/-/versions.json", process)
        with httpx.Client(base_url=base, timeout=60) as client:
            index = client.get("/")
            assert index.status_code == 200
            assert "Capsem sessions" not in index.text and "No Capsem home" not in index.text
            assert 'href="/other"' in index.text and 'href="/main"' in index.text
            assert database_names(client.get("/-/databases.json")) == {"other", "main"}
            notes = client.get("/main/notes.json?_shape=array")
            assert notes.status_code == 200 and notes.json()[0]["body"] == "a note of mine"
            for path in ("/", "/other", "/other/places", "/main/notes", "/-/versions"):
                response = client.get(path)
                assert response.status_code == 200, path
                assert not ours(response), (path, response.headers)
            way_in = client.get("/-/capsem")  # the one way in: how to point it at a home
            assert way_in.status_code == 200
            assert "does not serve a Capsem home" in way_in.text
            assert 'href="/-/capsem"' not in index.text  # no menu link: no home on this machine
    finally:
        stderr = stop(process)
    assert "Traceback" not in stderr, stderr[-3000:]
    assert snapshot_tree(user) == {} and snapshot_tree(cache) == {}, "nothing written"


async def test_a_guest_links_to_a_home_it_found_and_serves_it_without_database_arguments(
    capsem_home, tmp_path, monkeypatch
):
    """A Capsem home at ~/.capsem: `datasette serve other.db` stays Datasette's (with a menu
    link to /-/capsem); plain `datasette serve` serves the home, as the README says."""
    other, _main = own_databases(tmp_path / "data")
    user, cache = tmp_path / "user", tmp_path / "xdg-cache"
    user.mkdir()
    (user / ".capsem").symlink_to(capsem_home)
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    for name in ("CAPSEM_HOME", "CAPSEM_RUN_DIR", "DATASETTE_CAPSEM_CACHE"):
        monkeypatch.delenv(name, raising=False)
    guest = Datasette([str(other)])
    await guest.invoke_startup()
    index = await guest.client.get("/")
    assert "Capsem sessions" not in index.text and 'href="/other"' in index.text
    assert 'href="/-/capsem"' in index.text  # the menu link, since a home is there
    way_in = await guest.client.get("/-/capsem")
    assert "A Capsem home is on this machine" in way_in.text
    assert str(capsem_home) not in way_in.text and str(user) not in way_in.text
    assert database_names(await guest.client.get("/-/databases.json")) == {"other"}
    assert not cache.exists(), "a guest writes nothing"

    host = Datasette()  # `datasette serve`, no database arguments
    await host.invoke_startup()
    assert "Capsem sessions" in (await host.client.get("/")).text
    assert {"main", "index"} <= database_names(await host.client.get("/-/databases.json"))


@pytest.fixture(scope="module")
def mixed_files(tmp_path_factory) -> tuple[Path, Path]:
    return own_databases(tmp_path_factory.mktemp("own") / "data")


async def mixed_instance(capsem_home, cache_dir, files, **plugin_config) -> Datasette:
    metadata = {
        "plugins": {
            PLUGIN: {
                "capsem_home": str(capsem_home),
                "cache_dir": str(cache_dir),
                "index_refresh_seconds": 0,
                **plugin_config,
            }
        }
    }
    datasette = Datasette([str(f) for f in files], metadata=metadata)
    await datasette.invoke_startup()
    return datasette


async def readable_ledger(datasette) -> str:
    """The id of a session whose ledger Datasette serves (the home holds broken ones too)."""
    sessions = (await datasette.client.get("/-/capsem/sessions.json")).json()["sessions"]
    for session in sessions:
        answer = await datasette.client.get(f"/{session['id']}.json")
        if session.get("has_ledger") and answer.status_code == 200:
            return session["id"]
    raise AssertionError("no readable ledger in the home")


async def test_a_mixed_instance_keeps_the_users_databases_and_says_which_main_wins(
    capsem_home, cache_dir, mixed_files, capsys
):
    other, main = mixed_files
    datasette = await mixed_instance(capsem_home, cache_dir, mixed_files)
    said = capsys.readouterr().err
    assert "a database you serve is called main; yours keeps the name" in said
    databases = {
        d["name"]: d for d in databases_of(await datasette.client.get("/-/databases.json"))
    }
    assert databases["main"]["path"] == str(main) and databases["other"]["path"] == str(other)
    assert "index" in databases  # Capsem's cross-session index, its name free
    notes = await datasette.client.get("/main/notes.json?_shape=array")
    assert notes.status_code == 200 and notes.json()[0]["body"] == "a note of mine"
    home = await datasette.client.get("/")
    assert "Capsem sessions" in home.text
    assert 'href="/other"' in home.text and 'href="/main"' in home.text  # `/` lists both
    own_page = await datasette.client.get("/main/notes")
    assert own_page.status_code == 200 and "a note of mine" in own_page.text
    assert not (await datasette.client.get("/main.json")).json().get("queries")  # no canned
    ledger = await readable_ledger(datasette)
    assert (await datasette.client.get(f"/-/capsem/sessions/{ledger}")).status_code == 200


async def test_capsem_headers_stay_on_capsem_pages_only(capsem_home, cache_dir, mixed_files):
    datasette = await mixed_instance(capsem_home, cache_dir, mixed_files)
    ledger = await readable_ledger(datasette)
    for path in ("/", "/-/capsem", f"/-/capsem/sessions/{ledger}", f"/{ledger}", "/index"):
        response = await datasette.client.get(path)
        assert response.status_code == 200, path
        assert {"content-security-policy", "x-frame-options"} <= set(ours(response)), path
    for path in ("/other", "/other/places", "/other/places.json", "/main/notes"):
        response = await datasette.client.get(path)
        assert response.status_code == 200, path
        assert not ours(response), (path, response.headers)
    # Other plugins' assets on the user's table page, with no CSP to hold them back:
    # datasette-vega (a dependency of this plugin) and datasette-cluster-map (the test extra).
    page = (await datasette.client.get("/other/places")).text
    assert "/-/static-plugins/datasette_vega/" in page and "datasette-cluster-map" in page
    assert "DATASETTE_CLUSTER_MAP_LATITUDE_COLUMN" in page  # its inline script, allowed to run
    # The user's databases take their own methods (Datasette answers them), Capsem's do not.
    theirs = await datasette.client.post("/other/places", data={})
    assert "this instance is read-only" not in theirs.text  # Datasette's own answer
    assert (await datasette.client.post(f"/{ledger}", data={})).status_code == 405


@pytest.mark.browser
async def test_cluster_map_draws_on_a_users_table_beside_a_capsem_home(
    browser, capsem_home, cache_dir, mixed_files
):
    """datasette-cluster-map's inline script and its vendored Leaflet (datasette-leaflet's
    static files) run on `/other/places`: the map container is drawn with its markers. (The
    tiles come from the network, which the test machine does not have.)"""
    pytest.importorskip("datasette_cluster_map")
    with live_server(capsem_home, cache_dir, files=mixed_files, index_refresh_seconds=0) as base:
        page, _problems = await open_page(browser, base + "/other/places")
        try:
            await page.wait_for_selector(".leaflet-container", timeout=15000)
            if not DATASETTE_1:  # datasette-cluster-map 0.18 reads 0.65's JSON for its markers
                await page.wait_for_selector(".leaflet-marker-icon, .marker-cluster", timeout=15000)
        finally:
            await page.close()
