"""Display names to ids: unique, ambiguous, unknown, id-as-name, `to=`, the CLI, and a VM
named like another session's id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.state import get_state
from tests.helpers import actor_cookies, make_datasette, session_in, sessions_in
from tests.test_index import direct_sums, same

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("resolve-cache")


def by_name(manifest: dict, name: str) -> list[dict]:
    return sessions_in(manifest, where=lambda s: name in (s.get("name"), s["id"]))


async def test_a_unique_name_redirects_to_the_session_page(capsem_home, manifest, cache_dir):
    datasette = await make_datasette(capsem_home, cache_dir, index_refresh_seconds=0)
    (session,) = by_name(manifest, "co-work-1")
    response = await datasette.client.get("/-/capsem/resolve?name=co-work-1")
    assert response.status_code == 302
    assert response.headers["location"] == f"/-/capsem/sessions/{session['id']}"
    deep = await datasette.client.get("/-/capsem/resolve?name=co-work-1&to=traces")
    assert deep.headers["location"] == f"/-/capsem/sessions/{session['id']}/traces"
    body = (await datasette.client.get("/-/capsem/resolve.json?name=co-work-1")).json()
    assert body["name"] == "co-work-1" and body["id"] == session["id"]
    assert [c["id"] for c in body["candidates"]] == [session["id"]]


async def test_an_id_resolves_to_itself(capsem_home, manifest, cache_dir):
    datasette = await make_datasette(capsem_home, cache_dir, index_refresh_seconds=0)
    unnamed = sessions_in(
        manifest, has=("main_db_row",), where=lambda s: s.get("name") in (None, s["id"])
    )
    for session in unnamed:
        body = (await datasette.client.get(f"/-/capsem/resolve.json?name={session['id']}")).json()
        if len(body["candidates"]) == 1:
            assert body["id"] == session["id"]
    uuid = session_in(manifest, kind="ephemeral", has=("ledger",))["id"]
    response = await datasette.client.get(f"/-/capsem/resolve?name={uuid}")
    assert response.headers["location"] == f"/-/capsem/sessions/{uuid}"


@pytest.mark.parametrize("name", ["code-3", "code-vm1"])
async def test_an_exact_id_wins_over_another_sessions_name(capsem_home, manifest, cache_dir, name):
    """`code-3` is a /run id (id = name) and a persistent VM's name; `code-vm1` is one VM
    known under its old name-id in main.db and its registry UUID. The id is the session, as
    `/-/capsem/sessions/<id>` always was; the named one stays a candidate in the JSON."""
    datasette = await make_datasette(capsem_home, cache_dir, index_refresh_seconds=0)
    expected = {s["id"] for s in by_name(manifest, name)}
    assert len(expected) == 2 and name in expected
    body = (await datasette.client.get(f"/-/capsem/resolve.json?name={name}")).json()
    assert body["id"] == name
    assert {c["id"] for c in body["candidates"]} == expected
    page = await datasette.client.get(f"/-/capsem/resolve?name={name}&to=traces")
    assert page.status_code == 302
    assert page.headers["location"] == f"/-/capsem/sessions/{name}/traces"


async def test_an_unknown_name_is_a_404_with_near_matches(capsem_home, cache_dir):
    datasette = await make_datasette(capsem_home, cache_dir, index_refresh_seconds=0)
    response = await datasette.client.get("/-/capsem/resolve.json?name=co-work-9")
    assert response.status_code == 404
    assert {"co-work-1", "co-work-2"} & {
        s["name"] or s["id"] for s in response.json()["suggestions"]
    }
    html = await datasette.client.get("/-/capsem/resolve?name=%3Cscript%3Ex")
    assert html.status_code == 404 and "<script>x" not in html.text


@pytest.mark.parametrize(
    "query",
    [
        "",
        "name=",
        "name=co-work-1&to=//evil.example",
        "name=co-work-1&to=https://evil.example",
        "name=co-work-1&to=../../etc",
        "name=co-work-1&to=a/../../b",
        "name=" + "x" * 300,
    ],
)
async def test_bad_resolve_parameters_are_a_400(capsem_home, cache_dir, query):
    datasette = await make_datasette(capsem_home, cache_dir, index_refresh_seconds=0)
    response = await datasette.client.get(f"/-/capsem/resolve.json?{query}")
    assert response.status_code == 400, query


async def test_a_vm_named_like_another_sessions_id_never_shows_its_data(
    manifest, tmp_path, private_home
):
    home = private_home
    victim = session_in(manifest, kind="ephemeral", has=("ledger", "clean", "main_db_row"))
    (impostor,) = by_name(manifest, "co-work-1")
    registry_path = home / "run" / "persistent_registry.json"
    registry = json.loads(registry_path.read_text())
    entry = registry["vms"].pop("co-work-1")
    entry["name"] = victim["id"]  # a valid VM name (spec §2.1), and another session's id
    registry["vms"][victim["id"]] = entry
    registry_path.write_text(json.dumps(registry))
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    get_state(datasette).index.refresh()

    response = await datasette.client.get(f"/-/capsem/resolve?name={victim['id']}")
    assert response.headers["location"] == f"/-/capsem/sessions/{victim['id']}"
    body = (await datasette.client.get(f"/-/capsem/resolve.json?name={victim['id']}")).json()
    assert body["id"] == victim["id"]
    assert {c["id"]: c["match"] for c in body["candidates"]} == {
        victim["id"]: "id",
        impostor["id"]: "name",
    }
    rows = (await datasette.client.get("/-/capsem/sessions.json?_size=max&all=1")).json()
    listed = {r["id"]: r for r in rows["sessions"]}
    assert listed[impostor["id"]]["name"] == victim["id"]
    assert listed[impostor["id"]]["href"] == f"/-/capsem/sessions/{impostor['id']}"
    impostor_sums = direct_sums(home / impostor["ledger"], tmp_path / "c2")
    victim_sums = direct_sums(home / victim["ledger"], tmp_path / "c2")
    assert impostor_sums["file_events"] != victim_sums["file_events"]
    for row, sums in ((listed[impostor["id"]], impostor_sums), (listed[victim["id"]], victim_sums)):
        assert same(row["requests"], sums["requests"])
        assert same(row["file_events"], sums["file_events"])
    database = await datasette.client.get(
        f"/{victim['id']}/fs_events.json?_shape=array&_size=max&_col=id"
    )
    assert len(database.json()) == victim["counts"]["fs_events"]


def run_cli(*args: str):
    return CliRunner().invoke(cli, ["capsem", "resolve", *args])


async def test_cli_resolve(capsem_home, manifest, cache_dir):
    where = ["--home", str(capsem_home), "--cache-dir", str(cache_dir)]
    (unique,) = by_name(manifest, "co-work-1")
    result = run_cli("co-work-1", *where)
    assert result.exit_code == 0 and result.output.strip() == unique["id"]
    assert run_cli(unique["id"], *where).output.strip() == unique["id"]
    id_and_name = run_cli("code-3", *where)
    assert id_and_name.exit_code == 0 and id_and_name.stdout.strip() == "code-3"
    unknown = run_cli("co-work-9", *where)
    assert unknown.exit_code == 2 and "unknown session name or id" in unknown.output
    as_json = run_cli("code-vm1", "--json", *where)
    assert as_json.exit_code == 0
    assert json.loads(as_json.output)["id"] == "code-vm1"


async def test_a_session_the_actor_may_not_view_is_as_if_it_did_not_exist(
    capsem_home, manifest, cache_dir
):
    """Resolve answers a name, an id, an id prefix and a near miss from the sessions this actor
    may view: a redirect, a candidate or a suggestion would confirm the hidden session."""
    (private,) = by_name(manifest, "co-work-1")
    datasette = await make_datasette(
        capsem_home,
        cache_dir,
        metadata={"databases": {private["id"]: {"allow": {"id": "alice"}}}},
        index_refresh_seconds=0,
    )
    alice = actor_cookies(datasette, "alice")
    for name in ("co-work-1", private["id"], private["id"][:12]):
        hidden = await datasette.client.get(f"/-/capsem/resolve.json?name={name}")
        assert hidden.status_code == 404, name
        assert private["id"] not in str(hidden.json()["suggestions"]), name
        shown = await datasette.client.get(f"/-/capsem/resolve.json?name={name}", cookies=alice)
        assert shown.status_code == 200 and shown.json()["id"] == private["id"], name
        page = await datasette.client.get(f"/-/capsem/sessions/{name}")
        assert page.status_code == 404 and private["id"] not in page.text.replace(name, ""), name
    near = await datasette.client.get("/-/capsem/resolve.json?name=co-work-9")
    assert near.status_code == 404
    assert private["id"] not in near.text
    assert near.json()["suggestions"], "the other co-work sessions are still suggested"
    near_alice = await datasette.client.get("/-/capsem/resolve.json?name=co-work-9", cookies=alice)
    assert private["id"] in str(near_alice.json()["suggestions"])
