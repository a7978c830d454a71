"""Bad input gets a clear 4xx, never a 500, and never opens a file outside the catalog.

Every plugin route is requested with hostile values in each of its path parameters and query
parameters (traversal, NUL bytes, SQL, markup, unicode, huge and malformed values); every
canned query gets the same treatment in each of its parameters.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
import pytest_asyncio

from datasette_capsem.readonly import open_readonly
from datasette_capsem.state import get_state
from datasette_capsem.views.routes import ROUTES
from tests.helpers import session_in

async_test = pytest.mark.asyncio(loop_scope="session")

HOSTILE = [
    "../../../etc/passwd",
    "..%2F..%2Fetc%2Fpasswd",
    "a\x00b",
    "' OR 1=1 --",
    "1; DROP TABLE model_calls",
    "<script>window.__pwned=1</script>",
    "ünïcödé-🙂-名前",
    "x" * 5000,
    "-1",
    "1e309",
    "",
    "%",
    "~2F",
]
QUERY_PARAMS = [
    "q",
    "name",
    "to",
    "_size",
    "_next",
    "_sort",
    "_sort_desc",
    "status",
    "kind",
    "min_cost",
    "since",
    "until",
    "all",
    "with_db",
    "trace",
    "_format",
]


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def instance(datasette, capsem_home, manifest, tmp_path_factory):
    session = session_in(manifest, era="head", has=("clean", "traces"), lacks=("live",))
    conn = open_readonly(capsem_home / session["ledger"], tmp_path_factory.mktemp("c2"))
    event_id = conn.execute("SELECT event_id FROM net_events LIMIT 1").fetchone()[0]
    blob_id = conn.execute("SELECT id FROM event_body_blobs LIMIT 1").fetchone()[0]
    conn.close()
    valid = {
        "session_id": session["id"],
        "trace_id": session["traces"][0],
        "event_id": event_id,
        "blob_id": str(blob_id),
        "table": "model_calls",
        "row_id": "1",
        "call_id": "toolu_x",
        "format": ".json",
        "suffix": "",
    }
    return datasette, valid


def route_paths(valid: dict[str, str]) -> list[tuple[str, str]]:
    """(path template with one parameter replaced by {}, parameter name) for every route."""
    found = []
    for pattern, _handler in ROUTES:
        names = [n for n in re.findall(r"\(\?P<(\w+)>", pattern) if n not in ("format", "suffix")]
        skeleton = pattern.strip("^$").replace("\\.", ".").replace("/?", "")
        for name in names:
            path = skeleton
            for other in names:
                value = "{}" if other == name else valid[other]
                path = re.sub(rf"\(\?P<{other}>[^)]*\)\??", value, path)
            found.append((re.sub(r"\([^)]*\)\??", "", path), name))
        if not names:
            found.append((re.sub(r"\([^)]*\)\??", "", skeleton), ""))
    return found


def assert_clear_answer(response, where: str) -> None:
    assert response.status_code < 500, (where, response.status_code, response.text[:400])
    assert "Traceback" not in response.text, where


@async_test
async def test_hostile_path_parameters_get_a_4xx(instance):
    datasette, valid = instance
    checked = 0
    for template, name in route_paths(valid):
        if not name:
            continue
        for value in HOSTILE:
            path = template.replace("{}", quote(value, safe=""))
            response = await datasette.client.get(path, follow_redirects=True)
            assert_clear_answer(response, path)
            if value not in ("-1", "1e309"):
                assert 400 <= response.status_code < 500, (path, response.status_code)
            checked += 1
    assert checked > 50
    catalog = get_state(datasette).catalog
    assert all(catalog.session_for_database(name) for name in get_state(datasette).mounter.mounted)


MAX_URL = 60_000  # httpx refuses a URL of 64 KiB: 5000-character values go in smaller groups


async def answers_for_every_parameter(datasette, path: str, params: list, value: str, usual: int):
    """Every parameter of `params` set to `value` in one request; a group answered as the route
    answers without parameters (`usual`) was taken whole, so each of its parameters was read
    (or ignored) without harm. A group answered otherwise is split in two and each half asked
    again, down to one parameter alone, which is then the request the per-parameter matrix
    made: every parameter that changes the answer is still sent alone. Returns the parameters
    that, alone, changed the route's answer."""
    url = f"{path}?" + "&".join(f"{param}={quote(value, safe='')}" for param in params)
    if len(url) <= MAX_URL or len(params) == 1:
        response = await datasette.client.get(url)
        assert_clear_answer(response, url)
        if response.status_code == usual:
            return []
        if len(params) == 1:
            return params
    half = len(params) // 2
    return [
        *await answers_for_every_parameter(datasette, path, params[:half], value, usual),
        *await answers_for_every_parameter(datasette, path, params[half:], value, usual),
    ]


@async_test
@pytest.mark.heavy
async def test_hostile_query_parameters_never_break_a_route(instance):
    """Each route with each hostile value in each query parameter, without a request per
    (route, parameter, value): 6,032 requests, most of them the same page rendered again for
    a parameter the route never reads. Parameters go in groups (`answers_for_every_parameter`);
    one a route already answered differently to, alone, for an earlier value is sent alone at
    once (in a group it would change the group's answer and be split out alone again, a
    request per halving on the way)."""
    datasette, valid = instance
    alone = 0
    for template, name in route_paths(valid):
        path = template.replace("{}", quote(valid.get(name, ""), safe="")) if name else template
        usual = (await datasette.client.get(path)).status_code
        assert usual < 500, path
        changed: dict[str, int] = dict.fromkeys(QUERY_PARAMS, 0)
        for value in HOSTILE:
            # each group of one or of the others: every parameter is taken with `value`
            groups = [[param] for param in QUERY_PARAMS if changed[param]]
            groups.append([param for param in QUERY_PARAMS if not changed[param]])
            for group in filter(None, groups):
                for param in await answers_for_every_parameter(
                    datasette, path, group, value, usual
                ):
                    changed[param] += 1
                    alone += 1
    assert alone > 100  # many a parameter refused a value alone: the groups were split


@async_test
async def test_canned_query_parameters_are_bound_never_interpolated(instance):
    datasette, valid = instance
    database = valid["session_id"]
    queries = (await datasette.client.get(f"/{database}.json")).json()["queries"]
    assert queries
    for query in queries:
        params = query.get("params") or []
        for param in params:
            for value in HOSTILE:
                url = f"/{database}/{query['name']}.json?{param}={quote(value, safe='')}"
                response = await datasette.client.get(url)
                assert_clear_answer(response, url)
    # The SQL in a parameter was data: the table it tried to drop is still there.
    count = await datasette.client.get(f"/{database}/model_calls.json?_size=1")
    assert count.status_code == 200


@async_test
async def test_malformed_core_parameters_get_a_4xx_not_datasettes_500(instance, operator_datasette):
    datasette, valid = instance
    table = f"/{valid['session_id']}/model_calls"
    for url, named in (
        (f"{table}?_sort=nope", "nope"),
        (f"{table}.json?_sort_desc=nope", "nope"),
        (f"{table}.json?_through=abc", "_through"),
        (f"{table}.json?_timelimit=abc", "_timelimit"),
        # a column the registry does not show raw is refused to a viewer, naming it
        (f"{table}.json?_facet=nope", "model_calls.nope"),
        (f"{table}?_facet=nope", "model_calls.nope"),
        (f"{table}.json?_facet_array=nope", "nope"),
        (f"{table}.json?_facet_date=nope", "nope"),
    ):
        response = await datasette.client.get(url)
        assert 400 <= response.status_code < 500, (url, response.status_code)
        assert named in response.text, (url, response.text[:500])
    # The operator reaches Datasette, and 1.0 lets a facet on a missing column raise a 500
    # (0.65: a 400): a 400 naming the column on both lines.
    for url in (f"{table}.json?_facet=nope", f"{table}?_facet=nope"):
        response = await operator_datasette.client.get(url)
        assert response.status_code == 400, (url, response.status_code)
        assert "no such column: nope" in response.text, (url, response.text[:500])
    for url in (f"{table}.json", "/main/sessions.json"):
        response = await datasette.client.post(url, data={"x": "1"})
        assert response.status_code in (403, 405), (url, response.status_code)
