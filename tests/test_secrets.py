"""Credentials in ledgers never reach an actor without the capsem-view-secrets permission.

The test plays Capsem: it copies a generated home and plants credential-shaped values where
real ledgers carry them (headers, bodies, tool arguments, commands, previews). Then it walks
every route an actor could use — table pages in HTML, JSON and CSV, row pages, canned
queries, plugin pages, custom SQL that transforms or probes the value — and looks for them.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest
import pytest_asyncio
from blake3 import blake3

from datasette_capsem.mount.ledger_db import INLINE_MAX_BYTES
from datasette_capsem.state import get_state
from tests.helpers import actor_cookies, make_datasette, session_in

async_test = pytest.mark.asyncio(loop_scope="session")

SECRETS = {
    "bearer": "sk-ant-api03-PLANTEDSECRET0123456789abcdef",
    "openai": "sk-proj-PLANTEDSECRET0123456789abcdefgh",
    "aws": "AKIAPLANTEDSECRET012",
    "github": "ghp_PLANTEDSECRET0123456789abcdefghijklmn",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.UExBTlRFRFNFQ1JFVHNpZw",
    "password": "PlantedPassw0rd!",
    "google": "AIzaPLANTEDSECRET0123456789abcdefghijk",
}
# A key an agent writes through a streamed tool call: each SSE delta carries 6 characters of
# it, too few for any rule. A viewer sees the assembled arguments, masked, never a delta.
STREAMED_KEY = "sk-ant-api03-" + "".join(f"QZXQZ{i}" for i in range(8))
STREAMED_PARTS = [STREAMED_KEY[i : i + 6] for i in range(0, len(STREAMED_KEY), 6)]
# Fragments a transformation could leave behind; none may appear either.
FRAGMENTS = [
    "PLANTEDSECRET",
    "UExBTlRFRFNFQ1JFVHNpZw",
    "PlantedPassw0rd",
    b"PLANTEDSECRET".hex(" ")[:20],  # the hex-dump form of a binary body
    *[part for part in STREAMED_PARTS if "QZXQZ" in part],
]


def streamed_body() -> bytes:
    """An Anthropic stream whose tool call writes `STREAMED_KEY` in `input_json_delta`s."""
    deltas = ['{"command": "export ANTHROPIC_API_KEY=', *STREAMED_PARTS, '"}']
    events = ['event: message_start\ndata: {"type": "message_start"}']
    for delta in deltas:
        data = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": delta},
        }
        events.append(f"event: content_block_delta\ndata: {json.dumps(data)}")
    return ("\n\n".join(events) + "\n\n").encode()


def plant(ledger: Path) -> dict[str, int]:
    """Write credential-bearing rows the way Capsem would record them; returns their ids."""
    conn = sqlite3.connect(ledger)
    trace = conn.execute("SELECT trace_id FROM model_calls LIMIT 1").fetchone()[0]
    ids = {}
    ids["net_events"] = conn.execute(
        "INSERT INTO net_events (event_id, timestamp, domain, decision, method, path, query, "
        "request_headers, request_body_preview, trace_id, turn_id) VALUES "
        "('aaaaaaaaaaa1', '2026-08-01T00:00:00.000000Z', 'api.example.com', 'allowed', 'POST', "
        "'/v1/things', ?, ?, ?, ?, ?)",
        [
            f"alt=sse&key={SECRETS['google']}",
            f"authorization: Bearer {SECRETS['bearer']}\r\nx-api-key: {SECRETS['openai']}",
            f'{{"api_key": "{SECRETS["openai"]}", "password": "{SECRETS["password"]}"}}',
            trace,
            trace,
        ],
    ).lastrowid
    ids["tool_calls"] = conn.execute(
        "INSERT INTO tool_calls (event_id, timestamp, model_call_id, provider, status, call_index,"
        " call_id, tool_name, arguments, origin, trace_id, turn_id) VALUES ('aaaaaaaaaaa2', "
        "'2026-08-01T00:00:01.000000Z', NULL, '', 'responded', 0, '99', 'bash', ?, 'mcp', ?, ?)",
        [
            f'{{"command": "export AWS_ACCESS_KEY_ID={SECRETS["aws"]}; curl -H '
            f"'Authorization: token {SECRETS['github']}' https://x\"}}",
            trace,
            trace,
        ],
    ).lastrowid
    ids["exec_events"] = conn.execute(
        "INSERT INTO exec_events (event_id, timestamp, exec_id, command, stdout_preview, trace_id,"
        " turn_id) VALUES ('aaaaaaaaaaa3', '2026-08-01T00:00:02.000000Z', 'x1', ?, ?, ?, ?)",
        [
            f"gh auth login --with-token {SECRETS['github']}",
            f"token: {SECRETS['jwt']}",
            trace,
            trace,
        ],
    ).lastrowid
    # A binary (gRPC-like) body: shown as a hex dump, which splits text over lines.
    body = b"\x00\x01\x02 grpc frame x-goog-api-key: " + SECRETS["google"].encode() + b"\x00"
    ids["event_body_blobs"] = conn.execute(
        "INSERT INTO event_body_blobs (event_id, event_type, source_table, direction, "
        "content_type, original_bytes, stored_bytes, truncated, body_hash, body, trace_id, "
        "turn_id, created_at) VALUES ('aaaaaaaaaaa1', 'http.request', 'net_events', 'request', "
        "'application/grpc', ?, ?, 0, ?, ?, ?, ?, '2026-08-01T00:00:00.000000Z')",
        [len(body), len(body), "blake3:" + blake3(body).hexdigest(), body, trace, trace],
    ).lastrowid
    stream = streamed_body()
    ids["event_body_blobs_sse"] = conn.execute(
        "INSERT INTO event_body_blobs (event_id, event_type, source_table, direction, "
        "content_type, original_bytes, stored_bytes, truncated, body_hash, body, trace_id, "
        "turn_id, created_at) VALUES ('aaaaaaaaaaa1', 'http.request', 'net_events', "
        "'response', 'text/event-stream', ?, ?, 0, ?, ?, ?, ?, '2026-08-01T00:00:00.000000Z')",
        [len(stream), len(stream), "blake3:" + blake3(stream).hexdigest(), stream, trace, trace],
    ).lastrowid
    conn.commit()
    conn.close()
    return ids


@pytest.fixture(scope="module")
def planted(capsem_home, manifest, tmp_path_factory):
    root = tmp_path_factory.mktemp("secrets")
    home = root / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    session = session_in(manifest, era="head", kind="ephemeral", has=("clean",), lacks=("live",))
    ids = plant(home / session["ledger"])
    return home, root / "cache", session["id"], ids


@pytest_asyncio.fixture(loop_scope="session")
async def instance(planted):
    home, cache, session_id, ids = planted
    datasette = await make_datasette(home, cache, view_secrets={"id": "auditor"})
    return datasette, session_id, ids


def leaked(text: str) -> list[str]:
    return [fragment for fragment in FRAGMENTS if fragment in text]


async def get(datasette, route: str, **kwargs):
    """GET `route`, following Datasette 1.0's redirect of `/<db>.json?sql=` (and `.csv`) to
    `/<db>/-/query.json`; a redirect stays on this instance and carries no secret."""
    response = await datasette.client.get(route, follow_redirects=True, **kwargs)
    for hop in response.history:
        assert hop.headers["location"].startswith("/"), (route, hop.headers["location"])
        assert not leaked(hop.text) and not leaked(str(hop.headers.raw)), route
    return response


async def routes_for(datasette, session_id: str, ids: dict[str, int]) -> list[str]:
    db = f"/{session_id}"
    listing = (await datasette.client.get(f"{db}.json")).json()
    routes = [
        db,
        f"{db}.json",
        "/",
        "/-/capsem/sessions.json",
        f"/-/capsem/sessions/{session_id}",
        f"/-/capsem/sessions/{session_id}.json",
    ]
    for table in ("net_events", "tool_calls", "exec_events", "event_body_blobs", "model_calls"):
        routes += [
            f"{db}/{table}",
            f"{db}/{table}.json?_shape=array&_size=max",
            f"{db}/{table}.csv?_size=max",
            f"{db}/{table}.json?_shape=objects",
        ]
    for key, row_id in ids.items():
        table = key.removesuffix("_sse")
        routes += [f"{db}/{table}/{row_id}", f"{db}/{table}/{row_id}.json"]
    for query in listing.get("queries", []):
        routes.append(f"{db}/{query['name']}.json?_shape=array")
    for blob in (ids["event_body_blobs"], ids["event_body_blobs_sse"]):
        routes += [
            f"/-/capsem/sessions/{session_id}/events/aaaaaaaaaaa1/bodies/{blob}.json",
            f"/-/capsem/sessions/{session_id}/events/aaaaaaaaaaa1/bodies/{blob}",
            f"/-/capsem/sessions/{session_id}/events/aaaaaaaaaaa1/bodies/{blob}/download",
        ]
    for event_id in ("aaaaaaaaaaa1", "aaaaaaaaaaa2", "aaaaaaaaaaa3"):
        routes.append(f"/-/capsem/sessions/{session_id}/events/{event_id}.json")
        routes.append(f"/-/capsem/sessions/{session_id}/events/{event_id}")
    sql_probes = [
        "select request_headers, request_body_preview from net_events",
        "select substr(request_headers, 10), hex(request_headers), replace(request_headers, "
        "'Bearer', 'B') from net_events",
        "select id from net_events where request_headers like '%sk-ant%'",
        "select arguments, upper(arguments), command, stdout_preview from tool_calls, exec_events",
        "select group_concat(request_headers, '') as g from net_events",
        "select replace(query, 'AIza', 'A I z a') as q, substr(query, 5) from net_events",
        "select id from net_events where query like '%PLANTED%'",
    ]
    routes += [f"{db}.json?sql={quote(sql)}" for sql in sql_probes]
    routes += [f"{db}.csv?sql={quote(sql)}" for sql in sql_probes]
    where = quote("request_headers like '%sk-ant%'")
    routes += [
        f"{db}/net_events.json?_where={where}",
        f"{db}/net_events.json?request_headers__contains=sk-ant",
        f"{db}/net_events.json?_sort=request_headers",
    ]
    return routes


@async_test
async def test_an_actor_without_the_permission_never_sees_a_planted_secret(instance):
    datasette, session_id, ids = instance
    routes = await routes_for(datasette, session_id, ids)
    for route in routes:
        response = await get(datasette, route)
        assert response.status_code < 500, (route, response.text[:300])
        assert not leaked(response.text), (route, leaked(response.text))
        if "sql=" in route or "_where=" in route:  # SQL over a column not shown: refused
            assert response.status_code == 403, route
            assert "capsem-view-secrets" in response.text, route
    # SQL over shown columns runs for the same actor.
    shown = quote("select id, decision, status_code from net_events order by id")
    answered = await get(datasette, f"/{session_id}.json?sql={shown}&_shape=array")
    assert answered.status_code == 200
    assert ids["net_events"] in [row["id"] for row in answered.json()]
    for probe in (
        "request_headers__contains=sk-ant",
        "query__contains=PLANTED",
        "_sort=request_headers",
        "_facet=query",
        "request_headers=x",
    ):
        refused = await datasette.client.get(f"/{session_id}/net_events.json?{probe}")
        assert refused.status_code == 403, probe  # a filter would be a yes/no oracle
        assert "capsem-view-secrets" in refused.json()["message"]
        assert "view_secrets setting" in refused.json()["message"]  # how an operator grants it
    page = await datasette.client.get(f"/{session_id}/net_events?_sort=request_headers")
    assert page.status_code == 403 and "view_secrets: {id: alice}" in page.text


@async_test
async def test_a_streamed_secret_is_shown_assembled_and_masked_never_as_deltas(instance):
    datasette, session_id, ids = instance
    blob = ids["event_body_blobs_sse"]
    base = f"/-/capsem/sessions/{session_id}/events/aaaaaaaaaaa1/bodies/{blob}"
    page = (await datasette.client.get(base + ".json")).text
    assert "streamed fragment" in page and "ANTHROPIC_API_KEY=[redacted:api-key]" in page
    download = (await datasette.client.get(base + "/download")).content
    assert b"streamed fragment" in download and b"capsem.assembled" in download
    assert not leaked(page) and not leaked(download.decode("utf-8"))
    auditor = await datasette.client.get(
        base + ".json", cookies=actor_cookies(datasette, "auditor")
    )
    assert STREAMED_PARTS[3] in auditor.text  # the deltas are there for one who may see them


@async_test
async def test_the_auditor_sees_them_so_the_check_above_can_fail(instance):
    datasette, session_id, ids = instance
    cookies = actor_cookies(datasette, "auditor")
    response = await datasette.client.get(
        f"/{session_id}/net_events/{ids['net_events']}.json", cookies=cookies
    )
    assert SECRETS["bearer"] in response.text
    response = await get(
        datasette,
        f"/{session_id}.json?sql={quote('select hex(request_headers) h from net_events')}",
        cookies=cookies,
    )
    assert response.status_code == 200 and response.json()["rows"]


@async_test
async def test_a_statement_prepared_for_one_actor_never_serves_another(instance):
    """SQLite caches prepared statements; the probe of a viewer's SQL (which replaces the
    connection's authorizer) and a NULL-ing authorizer must not stick to them."""
    datasette, session_id, ids = instance
    sql = f"select request_headers from net_events where id = {ids['net_events']}"
    url = f"/{session_id}.json?sql={quote(sql)}&_shape=arrays"  # rows as lists on 0.65 and 1.0
    for _ in range(2):
        anonymous = await get(datasette, url)
        assert anonymous.status_code == 403 and "net_events.request_headers" in anonymous.text
        auditor = await get(datasette, url, cookies=actor_cookies(datasette, "auditor"))
        assert SECRETS["bearer"] in auditor.json()["rows"][0][0]
        page = await datasette.client.get(f"/{session_id}/net_events.json?_shape=array")
        assert page.status_code == 200 and not leaked(page.text)


@async_test
async def test_a_table_page_read_inline_for_the_auditor_then_a_viewer_hides_the_secret(instance):
    """Datasette's queries of a small ledger run in the loop's thread on one connection
    (mount/ledger_db.py); each query installs the policy of the request it serves."""
    datasette, session_id, _ids = instance
    url = f"/{session_id}/net_events.json?_shape=array&_size=max"
    for _ in range(2):
        auditor = await datasette.client.get(url, cookies=actor_cookies(datasette, "auditor"))
        assert SECRETS["bearer"] in auditor.text
        viewer = await datasette.client.get(url)
        assert viewer.status_code == 200 and not leaked(viewer.text)
    database = get_state(datasette).mounter.mounted[session_id]
    assert database._inline and database._state.size <= INLINE_MAX_BYTES  # so, inline


@async_test
async def test_masking_keeps_the_shape_of_the_value(instance):
    datasette, session_id, ids = instance
    response = await datasette.client.get(
        f"/-/capsem/sessions/{session_id}/events/aaaaaaaaaaa1.json"
    )
    if response.status_code == 200:
        assert "[redacted" in response.text
    table = await datasette.client.get(f"/{session_id}/net_events/{ids['net_events']}.json")
    assert table.status_code == 200
    assert "api.example.com" in table.text  # the rest of the row is still there


@async_test
async def test_raw_downloads_are_refused_to_actors_without_the_permission(instance):
    datasette, session_id, _ids = instance
    for route in (f"/{session_id}.db", f"/{session_id}/event_body_blobs/1.blob?_blob_column=body"):
        response = await datasette.client.get(route)
        assert response.status_code == 403
        assert "capsem-view-secrets" in response.text
        assert "view_secrets setting of the datasette-capsem plugin" in response.text


@async_test
async def test_registry_env_values_never_appear(instance):
    datasette, _session_id, _ids = instance
    for route in ("/", "/-/capsem/sessions.json?_size=max&all=1"):
        text = (await datasette.client.get(route)).text
        assert "ghp_FAKE" not in text


@async_test
async def test_trusted_header_is_ignored_unless_configured(planted):
    home, cache, session_id, ids = planted
    plain = await make_datasette(home, cache, view_secrets={"id": "auditor"})
    spoofed = await plain.client.get(
        f"/{session_id}/net_events/{ids['net_events']}.json",
        headers={"X-Forwarded-User": "auditor"},
    )
    assert not leaked(spoofed.text)
    trusting = await make_datasette(
        home, cache, view_secrets={"id": "auditor"}, trusted_actor_header="X-Forwarded-User"
    )
    proxied = await trusting.client.get(
        f"/{session_id}/net_events/{ids['net_events']}.json",
        headers={"X-Forwarded-User": "auditor"},
    )
    assert SECRETS["bearer"] in proxied.text
    other = await trusting.client.get(
        f"/{session_id}/net_events/{ids['net_events']}.json",
        headers={"X-Forwarded-User": "mallory"},
    )
    assert not leaked(other.text)


@async_test
async def test_an_actor_outside_the_instance_triggers_no_mount_and_learns_no_ids(planted):
    home, cache, session_id, _ids = planted
    datasette = await make_datasette(home, cache, metadata={"allow": {"id": "*"}})
    state = get_state(datasette)
    for path in (f"/{session_id}.json", f"/{session_id[:-3]}.json", "/20260402-153000-86ca.json"):
        response = await datasette.client.get(path)
        assert response.status_code in (403, 404), path
        assert session_id not in response.text
    assert not state.mounter.mounted  # nothing opened or decompressed for an outsider
    allowed = await datasette.client.get(
        f"/{session_id}.json", cookies=actor_cookies(datasette, "alice")
    )
    assert allowed.status_code == 200
