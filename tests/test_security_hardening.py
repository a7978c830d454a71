"""Issue 16, attacked again: each numbered item reproduced against the shipped team
configuration, as an anonymous visitor, a viewer, an operator without `view_secrets` (may run
SQL) and an auditor with it. Real HTTP through `datasette.client`; no mocks.

The credential corpus is planted with sqlite3 into a copy of a generated ledger (never into the
shared fixture): every shape of issue 16 in every column kind, as TEXT and as BLOB, raw,
JSON-escaped and nested. Each planted secret carries the tag `QZPLANT<nn>` so that any
fragment of it is found, in text, in hex and in base64.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest
import pytest_asyncio
import yaml
from blake3 import blake3

from datasette_capsem.permissions import DATASETTE_1
from datasette_capsem.redaction import HIDDEN
from tests.helpers import make_datasette, session_in, sessions_in, snapshot_tree
from tests.security_support import ROOT, core_routes, plugin_routes

async_test = pytest.mark.asyncio(loop_scope="session")
HEADER = "X-Forwarded-User"
ACTORS = {"anonymous": None, "viewer": "alice", "operator": "ops", "auditor": "auditor"}
TAG = re.compile(r"QZPLANT\d\d")

ENV_FILE = "cat .env\nSECRET=QZPLANT01aa\nPASSWORD=QZPLANT02bb\nauth_token=QZPLANT03cc\n"
CORPUS = {
    # table: {column: value} planted on one new row each (TEXT unless bytes)
    "model_calls": {
        "request_body_preview": json.dumps({"messages": [{"role": "user", "content": ENV_FILE}]}),
        "system_prompt_preview": "Use aws_secret_access_key=QZPLANT10jj/kkkk for S3.",
        "text_content": "Done: github_pat_QZPLANT09iiiiiiiiiiiiiiiiiii and hf_QZPLANT13nnnnnnnnnnnnnnnn",
        "thinking_content": "ya29.QZPLANT14oooooooooooo then xoxb-QZPLANT15-pppppppppp",
    },
    "tool_calls": {
        "tool_name": '=HYPERLINK("http://evil","QZ")',
        "arguments": json.dumps(
            {
                "env": {"DB_PASS": "QZPLANT04 dd", "stripe": "sk_live_QZPLANT05eeeeeeee"},
                "nested": json.dumps({"password": "QZPLANT06ff"}),
                "hook": "https://hooks.slack.com/services/T0/B0/QZPLANT16qqqq",
            }
        ),
        "response_preview": "-----BEGIN RSA PRIVATE KEY-----\nQZPLANT24\n-----END RSA PRIVATE KEY-----",
    },
    "exec_events": {
        "command": "psql postgres://admin:QZPLANT07gg@db.internal/x",
        "stdout_preview": "VAULT_TOKEN=hvs.QZPLANT08hhhhhhhhhhhhhhhh\n\tDB_PASSWORD=QZPLANT25yy",
        "stderr_preview": b"\x00\x01authorization: Bearer QZPLANT26zzzzzzzzzz\x00",  # a BLOB
    },
    "net_events": {
        "query": "X-Amz-Signature=QZPLANT17rr&sig=QZPLANT27ab&token=QZPLANT28cd",
        "request_headers": "cookie: session=QZPLANT18ss\r\nauthorization: Bearer QZPLANT19ttttt",
        "response_headers": "set-cookie: sid=QZPLANT29ef; HttpOnly",
        "request_body_preview": json.dumps({"input": "line1\nCookie: a=QZPLANT30gh\nok"}),
    },
    "security_decision_events": {
        "event_json": json.dumps(
            {"headers": {"Cookie": "sid=QZPLANT11ll"}, "ctx": json.dumps({"token": "QZPLANT12mm"})}
        ),
    },
}
SMALL_BODY = b'\x00\x01POST /x\r\nCookie: a=QZPLANT20uu\r\n\r\n{"api_key":"QZPLANT21vv"}\x00'
BIG_BODY = json.dumps(
    {"pad": "x" * 70_000, "messages": [{"content": "ok\npassword=QZPLANT22ww\n"}]}
).encode()
BLOB_TEXT_COLUMN = b"authorization: Bearer QZPLANT23xxxxxxxx"  # tool_responses.content_preview
ALL_TAGS = {f"QZPLANT{n:02d}" for n in range(1, 31)}


def _copy_row(conn: sqlite3.Connection, table: str, changes: dict) -> int:
    row = conn.execute(f"SELECT * FROM {table} ORDER BY id LIMIT 1")
    names = [d[0] for d in row.description]
    values = dict(zip(names, row.fetchone(), strict=True))
    values.pop("id")
    values.update(changes)
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    return conn.execute(
        f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(values.values())
    ).lastrowid


def plant(ledger: Path) -> dict:
    conn = sqlite3.connect(ledger)
    trace = conn.execute("SELECT trace_id FROM model_calls LIMIT 1").fetchone()[0]
    planted: dict = {"trace": trace, "events": {}, "rows": {}}
    for table, columns in CORPUS.items():
        event_id = secrets.token_hex(6)
        changes = {**columns, "event_id": event_id, "trace_id": trace}
        planted["rows"][table] = _copy_row(conn, table, changes)
        planted["events"][table] = event_id
    call = planted["rows"]["model_calls"]
    planted["rows"]["tool_responses"] = _copy_row(
        conn, "tool_responses", {"content_preview": BLOB_TEXT_COLUMN, "model_call_id": call}
    )
    net_event = planted["events"]["net_events"]
    planted["blobs"] = []
    for body, direction in ((SMALL_BODY, "request"), (BIG_BODY, "response")):
        planted["blobs"].append(
            _copy_row(
                conn,
                "event_body_blobs",
                {
                    "event_id": net_event,
                    "source_table": "net_events",
                    "direction": direction,
                    "body": body,
                    "original_bytes": len(body),
                    "stored_bytes": len(body),
                    "body_hash": "blake3:" + blake3(body).hexdigest(),
                    "content_type": "application/octet-stream"
                    if b"\x00" in body
                    else "application/json",
                    "trace_id": trace,
                },
            )
        )
    conn.commit()
    conn.close()
    return planted


@pytest.fixture(scope="module")
def planted_home(capsem_home, manifest, tmp_path_factory):
    root = tmp_path_factory.mktemp("hardening")
    home = root / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    session = session_in(
        manifest, era="head", kind="ephemeral", has=("clean", "traces"), lacks=("live",)
    )
    info = plant(home / session["ledger"])
    return home, root / "cache", session, info


def team_metadata(**plugin) -> dict:
    metadata = yaml.safe_load((ROOT / "metadata.yml").read_text())
    metadata["allow_sql"] = {"id": ["ops", "auditor"]}
    config = metadata["plugins"]["datasette-capsem"]
    config["view_secrets"] = {"id": ["auditor"]}
    config.update(plugin)
    return metadata


async def team(home: Path, cache: Path, **plugin):
    """The README's team recipe, as `datasette serve .` reads it on each Datasette line."""
    metadata = team_metadata(**plugin)
    if DATASETTE_1:  # 1.0 reads allow_sql and settings from datasette.yaml
        config = yaml.safe_load((ROOT / "datasette.yaml").read_text())
        config["allow_sql"] = metadata["allow_sql"]
        return await make_datasette(home, cache, metadata=metadata, config=config)
    settings = json.loads((ROOT / "settings.json").read_text())
    return await make_datasette(home, cache, metadata=metadata, settings=settings)


@pytest.fixture(scope="module")
def home_before(planted_home) -> dict:
    """The planted home's files before `instance` (with a cache of its own) first read it."""
    return snapshot_tree(planted_home[0])


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def instance(planted_home, home_before):
    home, cache, session, info = planted_home
    return await team(home, cache), session, info


def headers_for(actor: str) -> dict:
    user = ACTORS[actor]
    return {HEADER: user} if user else {}


def found_tags(text: str) -> set[str]:
    """Planted tags in a response: as text, as hex (spaced or not), inside base64 values."""
    found = set(TAG.findall(text))
    squashed = re.sub(r"[^0-9a-fA-F]", "", text)
    for tag in ALL_TAGS:
        if tag.encode().hex() in squashed.lower():
            found.add(tag)
    for encoded in re.findall(r'"encoded":\s*"([A-Za-z0-9+/=]+)"', text):
        found |= set(TAG.findall(base64.b64decode(encoded).decode("latin-1")))
    return found


def corpus_routes(session_id: str, info: dict) -> list[str]:
    db = "/" + quote(session_id, safe="")
    event = info["events"]["net_events"]
    ids = {
        "session_id": session_id,
        "trace_id": info["trace"],
        "event_id": event,
        "blob_id": str(info["blobs"][0]),
        "row_id": str(info["rows"]["model_calls"]),
    }
    routes = plugin_routes(ids) + core_routes(ids)
    sp = f"/-/capsem/sessions/{quote(session_id, safe='')}"
    for event_id in info["events"].values():
        routes += [f"{sp}/events/{event_id}", f"{sp}/events/{event_id}.json"]
    for blob in info["blobs"]:
        routes += [f"{sp}/events/{event}/bodies/{blob}", f"{sp}/events/{event}/bodies/{blob}.json"]
    shapes = ("", "?_shape=array", "?_shape=objects", "?_shape=arrays", "?_shape=object")
    for table, row in info["rows"].items():
        base = f"{db}/{table}"
        routes += [base, f"{base}.csv?_size=max", f"{base}/{row}", f"{base}/{row}.json"]
        routes += [f"{base}.json{shape}" for shape in shapes]
        routes += [f"{base}.json?_shape=array&id={row}", f"{base}.csv?id={row}"]
    routes += [f"{db}/trace_chain.json?trace_id={quote(info['trace'])}&_shape=array"]
    routes += [f"{db}/trace_chain.csv?trace_id={quote(info['trace'])}"]
    for sql in (
        "select * from net_events",
        "select request_headers, query, arguments from net_events, tool_calls",
        "select hex(stderr_preview), substr(command, 2) from exec_events",
        "select group_concat(event_json) from security_decision_events",
    ):
        routes += [f"{db}.json?sql={quote(sql)}", f"{db}.csv?sql={quote(sql)}"]
    return routes


async def crawl(datasette, routes: list[str], actor: str) -> dict[str, set[str]]:
    leaks: dict[str, set[str]] = {}
    for route in routes:
        response = await datasette.client.get(route, headers=headers_for(actor))
        assert response.status_code < 500, (actor, route, response.status_code, response.text[:300])
        assert "Traceback" not in response.text, (actor, route)
        tags = found_tags(response.text)
        if tags:
            leaks[route] = tags
    return leaks


# --- items 1-4: credentials --------------------------------------------------------------------


@async_test
async def test_corpus_crawl_nothing_survives_for_viewers_everything_for_the_auditor(
    instance, planted_home, home_before
):
    """...and reading changes no Capsem file but a live ledger's -shm: the crawl is the first
    reading of the home by `instance`, whose cache starts empty (the first reads of every
    route, for every actor)."""
    datasette, session, info = instance
    routes = corpus_routes(session["id"], info)
    for actor in ("anonymous", "viewer", "operator"):
        leaks = await crawl(datasette, routes, actor)
        assert not leaks, (actor, leaks)
    shown = await crawl(datasette, routes, "auditor")
    seen = set().union(*shown.values())
    assert seen == ALL_TAGS, sorted(ALL_TAGS - seen)  # the crawl can fail both ways
    after = snapshot_tree(planted_home[0])
    changed = {p for p in home_before.keys() | after.keys() if home_before.get(p) != after.get(p)}
    assert all(p.endswith("-shm") for p in changed), sorted(changed)


@async_test
async def test_carriers_are_hidden_whole_with_a_visible_marker(instance):
    datasette, session, info = instance
    row = info["rows"]["net_events"]
    url = f"/{session['id']}/net_events/{row}.json?_shape=objects"
    viewer = (await datasette.client.get(url, headers=headers_for("viewer"))).json()["rows"][0]
    for column in ("query", "request_headers", "response_headers"):
        assert viewer[column] == HIDDEN
    assert "[redacted:" in viewer["request_body_preview"]  # free text: masked, still there
    html = await datasette.client.get(
        f"/{session['id']}/net_events/{row}", headers=headers_for("viewer")
    )
    assert "[hidden: may contain credentials]" in html.text
    auditor = (await datasette.client.get(url, headers=headers_for("auditor"))).json()["rows"][0]
    assert "QZPLANT17" in auditor["query"]


@async_test
async def test_plugin_event_page_hides_carriers_and_masks_escaped_text(instance):
    datasette, session, info = instance
    event = info["events"]["net_events"]
    url = f"/-/capsem/sessions/{session['id']}/events/{event}.json"
    data = (await datasette.client.get(url, headers=headers_for("viewer"))).json()
    cells = data["rows"][0]["cells"]
    assert cells["query"] == HIDDEN and cells["request_headers"] == HIDDEN
    big = info["blobs"][1]
    body = await datasette.client.get(
        f"/-/capsem/sessions/{session['id']}/events/{event}/bodies/{big}.json",
        headers=headers_for("viewer"),
    )
    assert body.status_code == 200 and "[redacted:" in body.text and not found_tags(body.text)


@async_test
async def test_no_oracle_on_masked_or_hidden_columns(instance):
    datasette, session, _info = instance
    db = f"/{session['id']}"
    probes = [
        "net_events.json?_facet=query",
        'net_events.json?_facet={"simple":"query"}',
        'net_events.json?_facet={"array":"request_headers"}',
        "net_events.json?_facet_array=request_headers",
        "net_events.json?query__contains=QZPLANT17",
        "tool_calls.json?arguments__contains=QZPLANT04",
        "tool_calls.json?_sort=arguments",
        "tool_calls.json?_sort_desc=arguments",
        "exec_events.json?_search_command=psql",
        'model_calls.json?_through={"table":"tool_calls","column":"arguments","value":"x"}',
    ]
    for actor in ("viewer", "operator"):
        for probe in probes:
            response = await datasette.client.get(f"{db}/{probe}", headers=headers_for(actor))
            assert response.status_code == 403, (actor, probe, response.status_code)
    allowed = await datasette.client.get(
        f"{db}/net_events.json?_facet=query", headers=headers_for("auditor")
    )
    assert allowed.status_code == 200
    # The search index holds ids, never values: a secret finds nothing.
    for q in ("QZPLANT04", "QZPLANT17"):
        hits = await datasette.client.get(
            f"/-/capsem/search.json?q={q}", headers=headers_for("viewer")
        )
        assert hits.status_code == 200 and not found_tags(hits.text.replace(q, ""))


@async_test
async def test_hide_free_text_setting_hides_it_whole(planted_home):
    home, cache, session, info = planted_home
    datasette = await team(home, cache, hide_free_text=True)
    row = info["rows"]["tool_calls"]
    data = (
        await datasette.client.get(
            f"/{session['id']}/tool_calls/{row}.json?_shape=objects", headers=headers_for("viewer")
        )
    ).json()["rows"][0]
    assert data["arguments"] == HIDDEN and data["response_preview"] == HIDDEN
    event = info["events"]["tool_calls"]
    page = await datasette.client.get(
        f"/-/capsem/sessions/{session['id']}/events/{event}.json", headers=headers_for("viewer")
    )
    assert page.json()["rows"][0]["cells"]["arguments"] == HIDDEN
    auditor = (
        await datasette.client.get(
            f"/{session['id']}/tool_calls/{row}.json?_shape=objects", headers=headers_for("auditor")
        )
    ).json()["rows"][0]
    assert "QZPLANT04" in auditor["arguments"]


# --- items 5-6: anonymous visitors learn nothing --------------------------------------------------


@async_test
async def test_anonymous_gets_the_same_refusal_for_ids_prefixes_and_names(instance, manifest):
    datasette, session, _info = instance
    name = session_in(manifest, has=("name",))["name"]
    sid = session["id"]
    answers = []
    for value in (sid, sid[:2], sid[:-3], name, "no-such-session-xyz"):
        for suffix in ("", ".json", "/check", "/traces/x"):
            response = await datasette.client.get(
                f"/-/capsem/sessions/{quote(value, safe='')}{suffix}", follow_redirects=False
            )
            assert response.status_code == 403, (value, suffix, response.status_code)
            assert sid not in response.text and name not in response.text
            answers.append(response.text.replace(quote(value, safe=""), "").replace(value, ""))
    for path in ("/-/capsem/resolve?name=" + quote(name), "/-/capsem/search.json?q=" + sid[:8]):
        response = await datasette.client.get(path)
        assert response.status_code == 403 and sid not in response.text
    assert len(set(answers)) <= 2  # HTML and JSON forms of one refusal


# Where Datasette shows the instance's configuration (the plugin's settings among it): 1.0
# moved it from /-/metadata.json to /-/config.json.
CONFIG_PAGE = "/-/config.json" if DATASETTE_1 else "/-/metadata.json"


@async_test
async def test_configuration_and_paths_are_for_operators(instance, planted_home):
    datasette, session, _info = instance
    home, _cache, _session, _planted = planted_home
    for actor in ("viewer", "operator"):
        meta = await datasette.client.get(CONFIG_PAGE, headers=headers_for(actor))
        assert meta.status_code == 200
        assert "X-Forwarded-User" not in meta.text and "auditor" not in meta.text
        for path in (
            "/-/databases.json",
            "/-/capsem/sessions.json?all=1",
            f"/-/capsem/sessions/{session['id']}.json",
            f"/-/capsem/sessions/{session['id']}",
            "/",
            "/index/ledgers.json",
            "/-/capsem/index.json",
        ):
            response = await datasette.client.get(path, headers=headers_for(actor))
            assert str(home) not in response.text, (actor, path)
            assert (
                str(datasette.plugin_config("datasette-capsem")["cache_dir"]) not in response.text
            )
    meta = await datasette.client.get(CONFIG_PAGE, headers=headers_for("auditor"))
    assert "X-Forwarded-User" in meta.text  # the operator still sees it: the test can fail
    databases = await datasette.client.get("/-/databases.json", headers=headers_for("auditor"))
    assert str(home) in databases.text


# --- items 7-9: availability and bad input --------------------------------------------------------


@async_test
async def test_floods_of_parameters_are_refused_cheaply(instance):
    datasette, session, _info = instance
    many = "&".join("p" for _ in range(2000))  # 2,000 parameters in 4 KB
    long = "q=" + "x" * 20_000
    for actor in ACTORS:
        for path in (f"/{session['id']}/model_calls.json", "/", "/-/capsem/sessions.json"):
            flood = await datasette.client.get(f"{path}?{many}", headers=headers_for(actor))
            assert flood.status_code == 400 and "Too many" in flood.text
            huge = await datasette.client.get(f"{path}?{long}", headers=headers_for(actor))
            assert huge.status_code == 414
    ok = await datasette.client.get("/-/capsem/sessions.json", headers=headers_for("viewer"))
    assert ok.status_code == 200


@async_test
async def test_datasette_core_500s_are_clear_4xx(instance):
    datasette, session, _info = instance
    db = f"/{session['id']}"
    urls = [
        f"{db}.csv",
        f"{db}.json?_shape=array",
        f"{db}/model_calls.json?_through=abc",
        f'{db}/model_calls.json?_through={{"table":"dns_events","column":"qname","value":"x"}}',
        f"{db}/model_calls.json?_facet={{bad",
        f'{db}/model_calls.json?_facet={{"simple":1}}',
        f"{db}/model_calls.json?_sort=id&_sort_desc=id",
        "/main/sessions.json?_sort=id&_sort_desc=id",
    ]
    for actor in ("viewer", "operator", "auditor"):
        for url in urls:
            response = await datasette.client.get(url, headers=headers_for(actor))
            assert 400 <= response.status_code < 500, (actor, url, response.status_code)
    listing = (await datasette.client.get(f"{db}.json", headers=headers_for("auditor"))).json()
    canned = [f"{db}/{q['name']}" for q in listing["queries"]][:5]
    plugin = ["/", "/-/capsem/sessions.json", f"/-/capsem/sessions/{session['id']}"]
    for actor in ACTORS:
        for url in canned + plugin + [f"{db}/model_calls.json"]:
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                response = await datasette.client.request(method, url, headers=headers_for(actor))
                assert response.status_code == 405, (actor, method, url, response.status_code)


@async_test
async def test_a_duplicated_trusted_header_is_refused(instance):
    datasette, session, _info = instance
    url = f"/{session['id']}/net_events.json"
    response = await datasette.client.get(url, headers=[(HEADER, "alice"), (HEADER, "auditor")])
    assert response.status_code == 400 and "more than once" in response.text
    assert not found_tags(response.text)
    single = await datasette.client.get(url, headers={HEADER: "alice"})
    assert single.status_code == 200


# --- items 10-12: defence in depth ------------------------------------------------------------------


@async_test
async def test_every_html_response_carries_the_policy_headers(instance, capsem_home, manifest):
    datasette, session, info = instance
    db = f"/{session['id']}"
    paths = [
        db,
        f"{db}/model_calls",
        f"{db}/model_calls/{info['rows']['model_calls']}",
        f"{db}/token_totals",
        f"{db}/no_such_table",
        "/main/sessions",
        "/-/capsem/sessions/nope",
        "/nope-nope-nope",
    ]
    broken = sessions_in(manifest, has=("ledger",), lacks=("clean",))
    paths += [f"/{quote(s['id'], safe='')}" for s in broken[:5]]
    statuses = set()
    for actor in ACTORS:
        for path in paths:
            response = await datasette.client.get(path, headers=headers_for(actor))
            statuses.add(response.status_code)
            policy = response.headers.get("content-security-policy", "")
            assert (
                "frame-ancestors 'none'" in policy
                and "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";")[0]
            ), (actor, path)
            if path.startswith("/-/capsem"):  # plugin pages: no string evaluation either
                assert "'unsafe-eval'" not in policy, (actor, path)
            assert response.headers.get("x-frame-options") == "DENY"
            assert response.headers.get("referrer-policy")
    assert {200, 403, 404} <= statuses


@async_test
async def test_csv_cells_that_start_a_formula_are_neutralised(instance):
    datasette, session, info = instance
    row = info["rows"]["tool_calls"]
    for actor in ("viewer", "auditor"):
        csv_text = (
            await datasette.client.get(
                f"/{session['id']}/tool_calls.csv?id={row}", headers=headers_for(actor)
            )
        ).text
        assert "'=HYPERLINK" in csv_text
        assert not re.search(r'(^|,)"?=HYPERLINK', csv_text, re.M)
