"""The repository's own metadata.yml and settings.json, served as a team instance."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from datasette_capsem.permissions import DATASETTE_1
from datasette_capsem.redaction import HIDDEN
from tests.helpers import make_datasette, session_in

async_test = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parent.parent


async def team_instance(home: Path, cache: Path):
    """The repository's team configuration as `datasette serve .` reads it: metadata.yml and
    settings.json on Datasette 0.65; metadata.yml and datasette.yaml on 1.0."""
    metadata = yaml.safe_load((ROOT / "metadata.yml").read_text())
    if DATASETTE_1:
        config = yaml.safe_load((ROOT / "datasette.yaml").read_text())
        return await make_datasette(home, cache, metadata=metadata, config=config)
    settings = json.loads((ROOT / "settings.json").read_text())
    return await make_datasette(home, cache, metadata=metadata, settings=settings)


def test_the_one_point_o_configuration_agrees_with_metadata_and_settings():
    """datasette.yaml repeats, for 1.0, what 0.65 reads from metadata.yml and settings.json."""
    config = yaml.safe_load((ROOT / "datasette.yaml").read_text())
    metadata = yaml.safe_load((ROOT / "metadata.yml").read_text())
    settings = json.loads((ROOT / "settings.json").read_text())
    # The one difference: 1.0 needs default_allow_sql on for allow_sql to grant anything.
    assert config["settings"] == {**settings, "default_allow_sql": True}
    assert config["allow_sql"] == metadata["allow_sql"]
    assert "plugins" not in config and "allow" not in config  # 1.0 moves metadata.yml's own


def as_user(user: str) -> dict[str, str]:
    return {"X-Forwarded-User": user}  # what the reverse proxy sets


@async_test
async def test_the_shipped_team_configuration(capsem_home, manifest, tmp_path):
    datasette = await team_instance(capsem_home, tmp_path / "cache")
    session = session_in(manifest, era="head", has=("clean", "ledger"), lacks=("live",))
    sid = session["id"]
    # No proxy header, no access at all.
    assert (await datasette.client.get("/")).status_code == 403
    assert (await datasette.client.get(f"/{sid}/model_calls.json")).status_code == 403
    # An authenticated user reads pages and JSON.
    for path in ("/", f"/{sid}", f"/{sid}/model_calls.json", f"/-/capsem/sessions/{sid}.json"):
        response = await datasette.client.get(path, headers=as_user("alice"))
        assert response.status_code == 200, path
    # Arbitrary SQL is for the named operators only.
    sql = f"/{sid}.json?sql={quote('select count(*) from model_calls')}"
    # (1.0 answers `/<db>.json?sql=` with a redirect to `/<db>/-/query.json`.)
    alice = await datasette.client.get(sql, headers=as_user("alice"), follow_redirects=True)
    assert alice.status_code == 403
    admin = await datasette.client.get(sql, headers=as_user("capsem-admin"), follow_redirects=True)
    assert admin.status_code == 200
    # Downloads are off; the settings are the tight ones.
    assert (
        await datasette.client.get(f"/{sid}.db", headers=as_user("capsem-admin"))
    ).status_code == 403
    live = (await datasette.client.get("/-/settings.json", headers=as_user("alice"))).json()
    assert live["allow_download"] is False and live["allow_csv_stream"] is False
    assert live["default_allow_sql"] is DATASETTE_1 and live["max_returned_rows"] <= 1000


@async_test
async def test_only_the_named_operator_sees_unmasked_credentials(capsem_home, manifest, tmp_path):
    datasette = await team_instance(capsem_home, tmp_path / "cache")
    registry_name = session_in(manifest, has=("name",))["name"]
    assert registry_name
    sid = session_in(manifest, era="head", has=("clean", "ledger"), lacks=("live",))["id"]
    table = f"/{sid}/net_events.json?_shape=array&_size=5"
    alice = (await datasette.client.get(table, headers=as_user("alice"))).json()
    admin = (await datasette.client.get(table, headers=as_user("capsem-admin"))).json()
    # A credential carrier: hidden whole, visibly (never a blank that looks like missing data).
    assert {row["request_headers"] for row in alice} <= {HIDDEN, None}
    assert any(row["request_headers"] == HIDDEN for row in alice)
    assert any(row["request_headers"] not in (None, HIDDEN) for row in admin)
