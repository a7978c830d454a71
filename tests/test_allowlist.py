"""Issue 25, points 1, 2 and 4-5: what a viewer sees of a column is decided once, by the
registry's classification (ledger/tables.py), for every column of every table; a column
nobody classified is hidden; no filter, sort, facet, search or SQL answers questions about a
column that is not shown raw. Each test goes both ways (the viewer refused or served nothing,
the auditor with view_secrets served), on a copy of a generated ledger planted with sqlite3."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest
import pytest_asyncio

from datasette_capsem.ledger import tables
from datasette_capsem.redaction import HIDDEN, UNCLASSIFIED_HIDDEN
from tests.helpers import make_datasette, session_in
from tests.test_security_hardening import headers_for, team

async_test = pytest.mark.asyncio(loop_scope="session")
DDL = Path(__file__).parent / "capsem_ddl"
UNKNOWN = "zzunknownvalue7"
NAMED_KEY = "ghp_" + "Q7x" * 12  # a GitHub token's shape: the masker masks it
WORDS = {  # plain words (no credential shape: the masker leaves them) in free-text columns
    ("dns_events", "qname"): "marmalade.example.com",
    ("exec_events", "command"): "echo periwinkle",
    ("fs_events", "path"): "/home/user/tangerine.txt",
    ("security_decision_events", "reason"): "because of buttercup",
}


def _columns_of(sql_file: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(":memory:")
    conn.executescript(sql_file.read_text())
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        t: [r[0] for r in conn.execute("SELECT name FROM pragma_table_info(?)", (t,))]
        for t in names
    }


def test_every_column_of_every_capsem_table_is_classified():
    """A new Capsem column fails here until someone says what a viewer sees of it."""
    unclassified = []
    files = sorted(DDL.glob("*.sql"))
    assert files
    for sql_file in files:
        database = "main" if sql_file.name.startswith("main") else "ledger"
        for table, columns in _columns_of(sql_file).items():
            unclassified += [
                f"{sql_file.name}: {table}.{column}"
                for column in columns
                if tables.column_kind(database, table, column) == tables.UNCLASSIFIED
            ]
    index_sql = Path(tables.__file__).parent.parent / "index" / "sql" / "create.sql"
    for table, columns in _columns_of(index_sql).items():
        unclassified += [
            f"index: {table}.{c}"
            for c in columns
            if tables.column_kind("index", table, c) == tables.UNCLASSIFIED
        ]
    assert unclassified == []
    # and the test can fail: a column no one classified is unclassified
    assert tables.column_kind("ledger", "net_events", "future_column") == tables.UNCLASSIFIED
    assert tables.column_kind("ledger", "legacy_table", "id") == tables.UNCLASSIFIED


@pytest.fixture(scope="module")
def allow_home(capsem_home, manifest, tmp_path_factory):
    root = tmp_path_factory.mktemp("allowlist")
    home = root / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    session = session_in(
        manifest, era="head", kind="ephemeral", has=("clean", "traces"), lacks=("live",)
    )
    conn = sqlite3.connect(home / session["ledger"])
    conn.execute("ALTER TABLE net_events ADD COLUMN future_column TEXT")
    conn.execute("UPDATE net_events SET future_column = ?", (UNKNOWN,))
    conn.execute("CREATE TABLE legacy_things (id INTEGER PRIMARY KEY, note TEXT)")
    conn.execute("INSERT INTO legacy_things (note) VALUES (?)", (UNKNOWN + "x",))
    for (table, column), word in WORDS.items():
        conn.execute(f"UPDATE {table} SET {column} = ?", (word,))
    # names an agent chose, carrying a credential (DNS exfiltration, a renamed process)
    first = conn.execute("SELECT min(id) FROM net_events").fetchone()[0]
    conn.execute(
        "UPDATE net_events SET domain = ?, process_name = ? WHERE id = ?",
        (f"{NAMED_KEY}.evil.example", NAMED_KEY, first),
    )
    conn.commit()
    conn.close()
    return home, root, session


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def allow_instance(allow_home):
    home, root, session = allow_home
    return await team(home, root / "cache"), session


def _probe_url(db: str, probe: str) -> str:
    return f"{db}/{probe}" if not probe.startswith(".") else f"{db}{probe}"


async def _refused_to_a_viewer_answered_for_the_auditor(datasette, db: str, probe: str) -> str:
    """The viewer's refusal page of `probe` (a 403 naming the permission); the auditor's 200."""
    url = _probe_url(db, probe)
    viewer = await _get(datasette, url, "operator")  # may run SQL, may not see secrets
    assert viewer.status_code == 403, (probe, viewer.status_code, viewer.text[:200])
    assert "capsem-view-secrets" in viewer.text, probe
    auditor = await _get(datasette, url, "auditor")
    assert auditor.status_code == 200, (probe, auditor.text[:200])
    return viewer.text


async def _get(datasette, url: str, actor: str):
    # Datasette 1.0 redirects /<db>.json?sql= to /<db>/-/query.json: follow it, as a client does
    return await datasette.client.get(url, headers=headers_for(actor), follow_redirects=True)


@async_test
async def test_an_unclassified_column_is_hidden_for_a_viewer_shown_to_the_operator(allow_instance):
    datasette, session = allow_instance
    db = f"/{session['id']}"
    for url in (
        f"{db}/net_events",
        f"{db}/net_events.json?_shape=objects",
        f"{db}/net_events.csv",
        f"{db}/legacy_things.json?_shape=array",
        f"{db}/legacy_things.csv",
    ):
        viewer = await _get(datasette, url, "viewer")
        assert viewer.status_code == 200, (url, viewer.text[:300])
        assert UNKNOWN not in viewer.text and UNCLASSIFIED_HIDDEN in viewer.text, url
        auditor = await _get(datasette, url, "auditor")
        assert auditor.status_code == 200 and UNKNOWN in auditor.text, url


@async_test
async def test_probes_of_columns_not_shown_are_refused_for_a_viewer_answered_for_the_auditor(
    allow_instance,
):
    datasette, session = allow_instance
    db = f"/{session['id']}"
    probes = [
        "dns_events.json?qname__startswith=marm",
        "dns_events.json?qname__contains=mala",
        "dns_events.json?qname__glob=m*",
        "dns_events.json?qname__like=m%25",
        "dns_events.json?qname__gt=a",
        "dns_events.json?qname=marmalade.example.com",
        "dns_events.json?_sort=qname",
        "dns_events.json?_sort_desc=qname",
        "dns_events.json?_facet=qname",
        "fs_events.json?path__startswith=/home",
        "exec_events.json?_facet=command",
        "security_decision_events.json?reason__contains=butter",
        "net_events.json?future_column__startswith=zz",
        "net_events.json?_sort=future_column",
        "legacy_things.json?note__startswith=zz",
        "dns_events.json?_where=" + quote("qname like 'marm%'"),
        ".json?sql=" + quote("select hex(qname) from dns_events"),
        ".json?sql=" + quote("select replace(path, '/', ':') from fs_events"),
        ".json?sql=" + quote("select id from dns_events where qname like 'marm%'"),
        ".json?sql=" + quote("select note from legacy_things"),
    ]
    for probe in probes:
        refusal = await _refused_to_a_viewer_answered_for_the_auditor(datasette, db, probe)
        column = probe.split("?")[1].split("=")[0].split("__")[0]
        if not column.startswith("_") and column != "sql":
            assert column in refusal, probe  # names the column
    # Shown columns still filter, sort, facet and answer SQL for the viewer.
    for probe in (
        "dns_events.json?decision__exact=allowed",
        "dns_events.json?_sort=timestamp",
        "dns_events.json?_facet=decision",
        "net_events.json?_facet=domain",
        ".json?sql=" + quote("select id, decision, count(*) from dns_events group by decision"),
    ):
        response = await _get(datasette, _probe_url(db, probe), "operator")
        assert response.status_code == 200, (probe, response.text[:300])


@async_test
async def test_a_name_an_agent_chose_is_masked_faceted_and_filtered_whole_never_probed(
    allow_instance, allow_home
):
    """A NAMED column (ledger/tables.py: a domain, a process name) may carry a credential
    that reads masked: a viewer facets it and filters it by a whole value, but no sort,
    comparison, pattern or SQL of theirs reads around the masker (`hex(domain)`)."""
    datasette, session = allow_instance
    home, _root, _ = allow_home
    conn = sqlite3.connect(f"file:{home / session['ledger']}?mode=ro", uri=True)
    plain = conn.execute(
        "SELECT domain FROM net_events WHERE domain NOT LIKE '%evil%' LIMIT 1"
    ).fetchone()[0]
    conn.close()
    db = f"/{session['id']}"
    for url in (f"{db}/net_events.json?_shape=array&_size=max", f"{db}/net_events.csv"):
        viewer = await _get(datasette, url, "viewer")
        assert viewer.status_code == 200 and NAMED_KEY not in viewer.text, url
        assert "[redacted:" in viewer.text, url  # masked, visibly
        assert NAMED_KEY in (await _get(datasette, url, "auditor")).text, url
    evil = quote(f"{NAMED_KEY}.evil.example")
    refused = [
        "net_events.json?domain__startswith=ghp_",
        "net_events.json?domain__contains=Q7x",
        "net_events.json?domain__endswith=evil.example",
        "net_events.json?domain__gt=g",
        "net_events.json?domain__like=g%25",
        "net_events.json?domain__glob=g*",
        "net_events.json?process_name__notcontains=Q",
        "net_events.json?_sort=domain",
        "net_events.json?_sort_desc=process_name",
        f"net_events.json?domain={evil}",  # "is this key here?"
        f"net_events.json?domain__in={evil}",
        "net_events.json?_where=" + quote("domain > 'g'"),
        ".json?sql=" + quote("select hex(domain) from net_events"),
        ".json?sql=" + quote("select count(*) from net_events where process_name > 'g'"),
    ]
    for probe in refused:
        await _refused_to_a_viewer_answered_for_the_auditor(datasette, db, probe)
    answered = [
        "net_events.json?_facet=domain&_facet=process_name",
        f"net_events.json?domain={quote(plain)}",
        f"net_events.json?domain__exact={quote(plain)}",
        f"net_events.json?domain__not={quote(plain)}",
        f"net_events.json?domain__in={quote(plain)}",
        "net_events.json?process_name__isnull=1",
        "net_events.json?domain__notblank=1",
    ]
    for probe in answered:
        response = await _get(datasette, _probe_url(db, probe), "operator")
        assert response.status_code == 200, (probe, response.text[:300])
        assert NAMED_KEY not in response.text, probe
    whole = (await _get(datasette, f"{db}/net_events.json?domain={quote(plain)}", "viewer")).json()
    assert whole["rows"] and all(plain in str(row) for row in whole["rows"])


@async_test
async def test_hide_free_text_leaves_no_planted_word_for_a_viewer(allow_home):
    home, root, session = allow_home
    datasette = await team(home, root / "cache-hide", hide_free_text=True, index_refresh_seconds=0)
    db = f"/{session['id']}"
    words = [w.split("/")[-1].split(".")[0].split()[-1] for w in WORDS.values()]
    routes = [
        f"{db}/{t}{suffix}"
        for t in ("dns_events", "exec_events", "fs_events", "security_decision_events")
        for suffix in ("", ".json?_shape=array", ".csv")
    ]
    routes += [f"{db}/trace_chain.json?trace_id={quote(t)}" for t in session["traces"][:2]]
    state_routes = [
        "/index/text_rows.json?_shape=array&_size=max",
        "/index/text_rows.csv",
        "/index/policy_events.json?_shape=array",
        "/index/text_search.json",
        "/index/text_search_idx.json?_size=max",
    ]
    await _get(datasette, "/-/capsem/sessions.json", "auditor")  # builds the index
    for url in routes + state_routes:
        viewer = await _get(datasette, url, "viewer")
        assert viewer.status_code < 500, (url, viewer.text[:300])
        assert not [w for w in words if w in viewer.text], (url, viewer.text[:300])
    seen = ""
    for url in routes:
        seen += (await _get(datasette, url, "auditor")).text
    assert all(w in seen for w in words)
    hidden = (await _get(datasette, f"{db}/exec_events.json?_shape=array", "viewer")).json()
    assert {row["command"] for row in hidden} == {HIDDEN}


@async_test
async def test_one_referrer_policy_header_on_datasette_and_plugin_routes(allow_instance):
    datasette, session = allow_instance
    for url in (f"/{session['id']}/net_events", "/-/versions.json", "/-/capsem/sessions"):
        response = await _get(datasette, url, "viewer")
        assert response.headers.get_list("referrer-policy") == ["same-origin"], url


@async_test
async def test_a_database_csv_400_page_is_not_run_through_the_csv_neutraliser(allow_instance):
    datasette, session = allow_instance
    response = await _get(datasette, f"/{session['id']}.csv", "viewer")
    assert response.status_code == 400 and "text/html" in response.headers["content-type"]
    # a neutralised page would have a quote before every line starting with - or =, and CSV
    # quoting of every line holding a comma
    assert "'-" not in response.text and '"<' not in response.text
    table = await _get(datasette, f"/{session['id']}/net_events.csv", "viewer")
    assert table.status_code == 200  # CSV itself still neutralised (test_security_hardening)


@async_test
async def test_a_viewer_is_offered_no_sort_or_facet_link_the_guard_would_refuse(
    allow_instance, allow_home
):
    """A table page's column headers (and its "Sort…" menu) offer a reader without
    view_secrets a sort on the columns shown raw only, and its suggested facets those and
    the names an agent chose: any other would answer 403 (secrets_guard.viewer_may_sort,
    viewer_may_facet), so its link is a dead end. The auditor keeps them all,
    and a database that is not Capsem's is Datasette's own page (test_good_citizen)."""
    datasette, session = allow_instance
    home, root, _ = allow_home
    url = f"/{session['id']}/net_events"
    for actor in ("viewer", "operator"):
        page = (await _get(datasette, url, actor)).text
        assert "_sort=port" in page and "_sort=status_code" in page, actor
        for column in ("domain", "process_name", "path", "query", "request_headers"):
            assert f"_sort={column}" not in page, (actor, column)
            assert f'<option value="{column}"' not in page, (actor, column)
            # the column is still there, with its name
            assert f'data-column="{column}"' in page, (actor, column)
        # and what is offered is answered
        assert (await _get(datasette, f"{url}?_sort=port", actor)).status_code == 200
    auditor = (await _get(datasette, url, "auditor")).text
    for column in ("domain", "process_name", "path", "query"):
        assert f"_sort={column}" in auditor and f'<option value="{column}"' in auditor, column
    # Suggested facets (the team recipe turns them off; an instance that keeps Datasette's
    # default suggests them): names an agent chose, never free text, even to a reader who may
    # facet by it (no suggestion statement runs on it: tests/test_facet_suggestions.py).
    for view_secrets, cache in ((False, "suggest-masked"), (True, "suggest-open")):
        suggesting = await make_datasette(home, root / cache, view_secrets=view_secrets)
        page = (await suggesting.client.get(url)).text
        assert "Suggested facets" in page and "_facet=domain" in page, view_secrets
        assert "_facet=path" not in page, view_secrets
        if view_secrets:
            assert (await suggesting.client.get(f"{url}?_facet=path")).status_code == 200
        if not view_secrets:
            assert (await suggesting.client.get(f"{url}?_facet=domain")).status_code == 200
            assert (await suggesting.client.get(f"{url}?_facet=path")).status_code == 403
