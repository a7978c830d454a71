"""The team instance without a reverse proxy (docs/datasette-versions.md, "Signing in without
a proxy"): an authentication plugin in the same environment gives the actor, and the
plugin's access rules and credential masking apply to it as to a proxy's header."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from datasette_capsem.permissions import DATASETTE_1
from datasette_capsem.redaction import HIDDEN
from tests.helpers import make_datasette

pytestmark = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parent.parent
TOKENS = {"alice": "alice-token-0123456789", "capsem-admin": "admin-token-0123456789"}


def team_metadata_without_proxy(auth: dict) -> dict:
    """The repository's metadata.yml with no trusted header, and `auth` (plugins' config)."""
    metadata = yaml.safe_load((ROOT / "metadata.yml").read_text())
    capsem = dict(metadata["plugins"]["datasette-capsem"])
    capsem.pop("trusted_actor_header")
    metadata["plugins"] = {"datasette-capsem": capsem, **auth}
    return metadata


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


async def a_ledger(datasette, headers) -> str:
    sessions = (await datasette.client.get("/-/capsem/sessions.json", headers=headers)).json()
    for session in sessions["sessions"]:
        answer = await datasette.client.get(f"/{session['id']}/net_events.json", headers=headers)
        if session.get("has_ledger") and answer.status_code == 200 and answer.json()["rows"]:
            return session["id"]
    raise AssertionError("no ledger with net_events")


async def test_datasette_auth_tokens_signs_in_a_team_without_a_proxy(capsem_home, tmp_path):
    pytest.importorskip("datasette_auth_tokens")
    tokens = [{"token": token, "actor": {"id": user}} for user, token in TOKENS.items()]
    metadata = team_metadata_without_proxy({"datasette-auth-tokens": {"tokens": tokens}})
    datasette = await make_datasette(capsem_home, tmp_path / "cache", metadata=metadata)
    assert (await datasette.client.get("/")).status_code == 403
    assert (
        await datasette.client.get("/", headers={"Authorization": "Bearer nope"})
    ).status_code == 403
    assert (await datasette.client.get("/", headers=bearer("alice"))).status_code == 200
    sid = await a_ledger(datasette, bearer("alice"))
    assert (
        await datasette.client.get(f"/-/capsem/sessions/{sid}", headers=bearer("alice"))
    ).status_code == 200
    table = f"/{sid}/net_events.json?_shape=array&_size=20"
    alice = (await datasette.client.get(table, headers=bearer("alice"))).json()
    admin = (await datasette.client.get(table, headers=bearer("capsem-admin"))).json()
    assert {row["request_headers"] for row in alice} <= {HIDDEN, None}
    assert any(row["request_headers"] not in (None, HIDDEN) for row in admin)
    # The proxy's header means nothing here: nobody set trusted_actor_header.
    spoofed = await datasette.client.get("/", headers={"X-Forwarded-User": "capsem-admin"})
    assert spoofed.status_code == 403


async def test_datasette_auth_passwords_login_form_works_beside_the_plugin(capsem_home, tmp_path):
    """The login form posts (the plugin refuses writes on Capsem's pages only), and the
    signed-in actor reads the instance."""
    utils = pytest.importorskip("datasette_auth_passwords.utils")
    auth = {"datasette-auth-passwords": {"alice_password_hash": utils.hash_password("s3cret")}}
    datasette = await make_datasette(
        capsem_home, tmp_path / "cache", metadata=team_metadata_without_proxy(auth)
    )
    assert (await datasette.client.get("/")).status_code == 403
    form = await datasette.client.get("/-/login")
    assert form.status_code == 200
    # 0.65 checks the form's token against its ds_csrftoken cookie; 1.0 sets no such cookie
    # (it checks Sec-Fetch-Site and Origin instead) and keeps the field for plugins' forms.
    csrftoken = re.search(r'name="csrftoken" value="([^"]*)"', form.text)[1]
    cookies = {"ds_csrftoken": form.cookies["ds_csrftoken"]} if not DATASETTE_1 else {}
    signed_in = await datasette.client.post(
        "/-/login",
        data={"username": "alice", "password": "s3cret", "csrftoken": csrftoken},
        cookies=cookies,
        headers={"Sec-Fetch-Site": "same-origin"},  # as a browser posts its own form
    )
    assert signed_in.status_code == 302, signed_in.text[:300]
    actor = signed_in.cookies["ds_actor"]
    assert (await datasette.client.get("/", cookies={"ds_actor": actor})).status_code == 200
