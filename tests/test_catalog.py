"""Discovery: the catalog is the union of main.db rows, session dirs and the registry."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from datasette_capsem.catalog import Catalog
from datasette_capsem.config import ConfigError, load_settings
from datasette_capsem.generate import GenerateOptions, generate_home
from tests.helpers import make_datasette, session_in, sessions_in

async_test = pytest.mark.asyncio(loop_scope="session")


def catalog_for(home: Path, cache: Path, **config) -> Catalog:
    return Catalog(load_settings({"capsem_home": str(home), "cache_dir": str(cache), **config}))


def test_catalog_matches_the_manifest_in_every_layout(capsem_home, manifest, tmp_path):
    catalog = catalog_for(capsem_home, tmp_path)
    for expected in sessions_in(manifest, where=lambda s: s.get("ledger") or s.get("main_db_row")):
        session = catalog.get(expected["id"])
        assert session is not None, expected["id"]
        if expected.get("ledger"):
            assert session.ledger_path == capsem_home / expected["ledger"], expected["id"]
        if expected.get("main_db_row"):
            assert session.status == expected["status"], expected["id"]


def test_persistent_vms_get_their_display_names_from_the_registry(capsem_home, manifest, tmp_path):
    catalog = catalog_for(capsem_home, tmp_path)
    named = sessions_in(manifest, kind="persistent", has=("name",))
    assert named
    for expected in named:
        assert catalog.get(expected["id"]).name == expected["name"]


def test_an_upgraded_vm_is_known_under_both_ids_with_one_ledger(capsem_home, manifest, tmp_path):
    catalog = catalog_for(capsem_home, tmp_path)
    by_ledger: dict[str, list[str]] = {}
    for s in sessions_in(manifest, kind="persistent", has=("ledger",)):
        by_ledger.setdefault(s["ledger"], []).append(s["id"])
    pairs = [ids for ids in by_ledger.values() if len(ids) == 2]
    assert pairs, "the generator plants a VM under two ids"
    for first, second in pairs:
        a, b = catalog.get(first), catalog.get(second)
        assert a.ledger_path == b.ledger_path
        assert a.same_vm_as == b.id or b.same_vm_as == a.id


def test_main_db_is_also_found_beside_the_run_dir(capsem_home, tmp_path):
    """The service uses parent(run_dir)/sessions/main.db, whatever CAPSEM_HOME says."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(capsem_home / "run", elsewhere / "run", symlinks=True)
    shutil.copytree(capsem_home / "sessions", elsewhere / "sessions", symlinks=True)
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    catalog = catalog_for(empty_home, tmp_path / "cache", run_dir=str(elsewhere / "run"))
    snapshot = catalog.snapshot()
    assert snapshot.main_db_path == elsewhere / "sessions" / "main.db"
    assert snapshot.main_db_problem is None
    assert any(s.has_ledger for s in snapshot.sessions.values())


def test_catalog_rescans_only_when_the_home_changes(tmp_path, private_home):
    home = private_home
    catalog = catalog_for(home, tmp_path / "cache")
    catalog.min_check_interval = 0
    before = len(catalog.sessions())
    assert catalog.refresh() is False  # nothing changed: a few stats, no rescan
    kept = dict(catalog.snapshot().sessions)
    new_dir = home / "run" / "sessions" / "11111111-2222-4333-8444-555555555555"
    new_dir.mkdir()
    shutil.copy(next((home / "run" / "persistent").glob("*/session.db")), new_dir / "session.db")
    assert catalog.refresh() is True
    assert len(catalog.sessions()) == before + 1
    assert catalog.get(new_dir.name).has_ledger
    # A rescan keeps every unchanged session's object: what pages and the index built from
    # it is kept by identity (index/listing.py, index/service.py).
    assert all(catalog.get(sid) is session for sid, session in kept.items())


def test_a_rescan_reads_main_db_and_the_registry_again_when_they_change(tmp_path, private_home):
    home = private_home
    catalog = catalog_for(home, tmp_path / "cache")
    catalog.min_check_interval = 0
    kept = dict(catalog.snapshot().sessions)
    row_id = next(sid for sid, s in kept.items() if s.main_row is not None and s.status != "x")
    writer = sqlite3.connect(home / "sessions" / "main.db")
    writer.execute("UPDATE sessions SET status = 'x-changed' WHERE id = ?", (row_id,))
    writer.commit()
    writer.close()
    assert catalog.refresh() is True
    assert catalog.get(row_id).status == "x-changed"
    assert catalog.get(row_id) is not kept[row_id]
    assert all(catalog.get(sid) is s for sid, s in kept.items() if sid != row_id)

    registry_path = home / "run" / "persistent_registry.json"
    registry = json.loads(registry_path.read_text())
    vm_name, entry = next(iter(registry["vms"].items()))
    entry["name"] = "renamed-by-the-test"
    registry_path.write_text(json.dumps(registry))
    assert catalog.refresh() is True
    assert any(s.name == "renamed-by-the-test" for s in catalog.sessions()), vm_name


@async_test
async def test_an_unparsable_registry_is_reported_and_the_rest_is_served(tmp_path):
    home = tmp_path / "home"
    manifest = generate_home(home, GenerateOptions(sessions=6, broken_registry=True))
    datasette = await make_datasette(home, tmp_path / "cache")
    page = await datasette.client.get("/")
    assert page.status_code == 200
    assert "persistent_registry.json" in page.text
    ledger = session_in(manifest, has=("ledger",), lacks=("broken",))
    assert (await datasette.client.get(f"/{ledger['id']}.json")).status_code == 200


@async_test
async def test_an_old_main_db_with_total_mcp_calls_is_read_by_column_name(tmp_path):
    home = tmp_path / "home"
    manifest = generate_home(home, GenerateOptions(sessions=6, old_main_db=True))
    datasette = await make_datasette(home, tmp_path / "cache")
    rows = (await datasette.client.get("/main/sessions.json?_shape=array")).json()
    assert "total_mcp_calls" in rows[0]
    listed = (await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
    assert {s["id"] for s in sessions_in(manifest, has=("main_db_row",))} <= {
        s["id"] for s in listed["sessions"]
    }


@async_test
async def test_a_missing_main_db_is_named_and_dirs_are_still_served(
    manifest, tmp_path, private_home
):
    home = private_home
    (home / "sessions" / "main.db").unlink()
    datasette = await make_datasette(home, tmp_path / "cache")
    page = await datasette.client.get("/")
    assert page.status_code == 200 and "main.db not found" in page.text
    missing = await datasette.client.get("/main.json")
    assert missing.status_code == 404 and "main.db" in missing.json()["message"]
    ledger = session_in(manifest, has=("ledger",), lacks=("broken",))
    assert (await datasette.client.get(f"/{ledger['id']}.json")).status_code == 200


def test_a_cache_inside_the_capsem_home_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="inside the Capsem home"):
        load_settings({"capsem_home": str(tmp_path), "cache_dir": str(tmp_path / "cache")})
