"""Full-text search across sessions: what the index holds equals independent SQL over the
ledgers (every era, forks once), ranked hits with escaped snippets and working links,
filters, pages, phrase and prefix queries, bad syntax as a 400, incremental refresh, and no
secret readable or probeable through search."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from urllib.parse import quote, urlencode

import pytest
import pytest_asyncio

from datasette_capsem.index import fts
from datasette_capsem.index.text import MARK_CLOSE, MARK_OPEN
from datasette_capsem.state import get_state
from tests.helpers import actor_cookies, make_datasette, session_in
from tests.trace_support import ledger, readable

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Independent of index/text.py: which ledger rows must be findable, by kind.
SEARCHABLE = {
    "dns": ("dns_events", ("qname",)),
    "file": ("fs_events", ("path",)),
    "exec": ("exec_events", ("command",)),
    "http": ("net_events", ("domain", "path", "method")),
    "reply": ("model_calls", ("text_content", "thinking_content")),
    "tool_result": ("tool_responses", ("content_preview",)),
}


async def text(datasette, q: str, status: int = 200, cookies=None, **params) -> dict:
    query = urlencode([("q", q), *[(k, v) for k, vs in params.items() for v in _list(vs)]])
    response = await datasette.client.get(f"/-/capsem/search.json?{query}", cookies=cookies)
    assert response.status_code == status, response.text[:500]
    return response.json()


def _list(value) -> list:
    return value if isinstance(value, (list, tuple)) else [value]


def index_rows(datasette, sql: str, params=()) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{get_state(datasette).index.path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def columns_of(conn, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


def _keys(conn, table: str) -> list[tuple[int, tuple]]:
    """(row id, identity) of every row: its event id, else its id, time, trace and call (how a
    fork's copied row is recognised, spec §1.3)."""
    present = columns_of(conn, table)
    signature = [c for c in ("id", "timestamp", "trace_id", "call_id") if c in present]
    event = "event_id" if "event_id" in present else "NULL"
    rows = conn.execute(f"SELECT id, {event}, {', '.join(signature)} FROM {table}")
    keys = []
    for row in rows:
        usable = isinstance(row[1], str) and row[1] not in ("", "000000000000")
        keys.append((row[0], ("e", row[1]) if usable else ("r", *row[2:])))
    return keys


def expected_rows(conn, kind: str, parent: sqlite3.Connection | None = None) -> set[int]:
    table, wanted = SEARCHABLE[kind]
    present = columns_of(conn, table)
    if not present:
        return set()
    cols = [c for c in wanted if c in present]
    blank = " AND ".join(f"trim(COALESCE(CAST({c} AS TEXT), '')) = ''" for c in cols)
    with_text = {r[0] for r in conn.execute(f"SELECT id FROM {table} WHERE NOT ({blank})")}
    copied = set()
    if parent is not None and columns_of(parent, table):
        theirs = {key for _id, key in _keys(parent, table)}
        copied = {row_id for row_id, key in _keys(conn, table) if key in theirs}
    return with_text - copied


def fork_parent(manifest: dict, fork: dict) -> dict:
    sessions = manifest["sessions"]
    by_id = [s for s in sessions if s["id"] == fork["forked_from"]]
    return (by_id or [s for s in sessions if s.get("name") == fork["forked_from"]])[0]


async def test_indexed_documents_equal_independent_sql_in_every_era(
    indexed_datasette, manifest, capsem_home, tmp_path
):
    eras = set()
    for session in readable(manifest):
        if session.get("alias_of"):
            continue
        parent = fork_parent(manifest, session) if session.get("forked_from") else None
        with ledger(capsem_home, session, tmp_path) as conn:
            for kind in SEARCHABLE:
                if parent is not None:
                    with ledger(capsem_home, parent, tmp_path) as parent_conn:
                        want = expected_rows(conn, kind, parent_conn)
                else:
                    want = expected_rows(conn, kind)
                got = {
                    r[0]
                    for r in index_rows(
                        indexed_datasette,
                        "SELECT row_id FROM text_rows WHERE session_id = ? AND kind = ?",
                        (session["id"], kind),
                    )
                }
                assert got == want, (session["id"], session["era"], kind)
                eras.add(session["era"])
    assert {"head", "0.9", "1.1", "1.2", "1.3", "0.16", "migrated"} <= eras


def phrase_in(text: str, phrase: str) -> bool:
    """Whether the tokens of `phrase` occur consecutively in `text` (as unicode61 splits)."""
    words, wanted = re.findall(r"\w+", text.lower()), re.findall(r"\w+", phrase.lower())
    return any(words[i : i + len(wanted)] == wanted for i in range(len(words) - len(wanted) + 1))


async def test_a_phrase_finds_exactly_the_rows_holding_it(
    indexed_datasette, manifest, capsem_home, tmp_path
):
    files = [s for s in readable(manifest) if not s.get("alias_of") and not s.get("forked_from")]
    sample = next(s for s in files if s["era"] == "head" and s.get("clean"))
    with ledger(capsem_home, sample, tmp_path) as conn:
        command = conn.execute(
            "SELECT command FROM exec_events WHERE command LIKE '% %' LIMIT 1"
        ).fetchone()[0]
    phrase = " ".join(command.split()[:2])
    expected = set()
    for session in files:
        with ledger(capsem_home, session, tmp_path) as conn:
            if "command" not in columns_of(conn, "exec_events"):
                continue
            for row in conn.execute("SELECT id, command FROM exec_events"):
                if row[1] and phrase_in(str(row[1]), phrase):
                    expected.add((session["id"], row[0]))
    data = await text(indexed_datasette, f'"{phrase}"', kind="exec", _size=200)
    found = {(h["session_id"], h["row_id"]) for h in data["text"]["hits"]}
    assert data["text"]["total"] == len(expected) <= 200
    assert found == expected
    for hit in data["text"]["hits"]:
        marked = " ".join(p["text"] for p in hit["snippet_parts"] if p["hit"])
        assert phrase_in(marked, phrase.split()[0])
        assert hit["href"].startswith(f"/-/capsem/sessions/{quote(hit['session_id'], safe='')}/")


async def test_prefix_queries_links_and_session_names(indexed_datasette, manifest):
    data = await text(indexed_datasette, "migrat*", _size=5)
    assert data["text"]["total"] > 0
    for hit in data["text"]["hits"]:
        marked = [p["text"].lower() for p in hit["snippet_parts"] if p["hit"]]
        assert marked and all(m.startswith("migrat") for m in marked)
        assert hit["kind"] and hit["at"]
        page = await indexed_datasette.client.get(hit["href"])
        assert page.status_code == 200, hit["href"]
    named = session_in(manifest, name="co-work-1")
    data = await text(indexed_datasette, "api*", session=named["id"], _size=3)
    assert data["text"]["hits"] and all(
        h["session_id"] == named["id"] for h in data["text"]["hits"]
    )
    assert data["text"]["hits"][0]["session_name"] == "co-work-1"
    html = (
        await indexed_datasette.client.get(f"/-/capsem/search?q=api*&session={named['id']}")
    ).text
    assert "co-work-1" in html and "<mark>" in html


async def every_hit(datasette, q: str) -> tuple[list[dict], dict]:
    """Every hit of `q`, page by page (200 a page), and the last page's answer."""
    everything, offset = [], 0
    while True:
        page = await text(datasette, q, _size=200, _next=offset)
        everything += page["text"]["hits"]
        if page["text"]["next"] is None:
            return everything, page
        offset += 200


async def test_filters_and_pages_agree_with_the_unfiltered_hits(indexed_datasette):
    everything, page = await every_hit(indexed_datasette, "api* OR let")
    assert len(everything) == page["text"]["total"] > 200
    assert len({h["doc_id"] for h in everything}) == len(everything)
    reply = next(h for h in everything if h["provider"] and h["model"])
    cases = [
        ({"kind": "dns"}, lambda h: h["kind"] == "dns"),
        ({"kind": ["dns", "http"]}, lambda h: h["kind"] in ("dns", "http")),
        ({"provider": reply["provider"]}, lambda h: h["provider"] == reply["provider"]),
        ({"model": reply["model"]}, lambda h: h["model"] == reply["model"]),
        ({"session": reply["session_id"]}, lambda h: h["session_id"] == reply["session_id"]),
        ({"since": "2026-08-01"}, lambda h: (h["at"] or "") >= "2026-08-01"),
        ({"until": "2026-07-31"}, lambda h: (h["at"] or "9")[:10] <= "2026-07-31"),
    ]
    for params, keep in cases:
        data = await text(indexed_datasette, "api* OR let", _size=200, **params)
        expected = {h["doc_id"] for h in everything if keep(h)}
        assert data["text"]["total"] == len(expected), params
        if len(expected) <= 200:
            assert {h["doc_id"] for h in data["text"]["hits"]} == expected, params


@pytest.mark.parametrize("query", ['"abc', "NOT x", "a OR", "AND", "NEAR(", "(", ")", "a AND (b"])
async def test_bad_syntax_is_a_clear_400(indexed_datasette, query):
    data = await text(indexed_datasette, query, status=400)
    assert data["error"] == "Bad search syntax" and "double quotes" in data["message"]
    html = await indexed_datasette.client.get(f"/-/capsem/search?q={quote(query)}")
    assert html.status_code == 400 and "Bad search syntax" in html.text


@pytest.mark.parametrize(
    "query",
    ["*", "^x", ":", "a:b", "-", "-rf", "x*y", "/etc/passwd", "évé", "'", "a,b", "NEAR(a b)"],
)
async def test_odd_queries_never_fail(indexed_datasette, query):
    response = await indexed_datasette.client.get(f"/-/capsem/search.json?q={quote(query)}")
    assert response.status_code in (200, 400), (query, response.text[:300])


async def test_bad_filters_are_400(indexed_datasette):
    for params in ({"kind": "bogus"}, {"since": "yesterday"}, {"_size": "0"}, {"_next": "x"}):
        data = await text(indexed_datasette, "api", status=400, **params)
        assert data["ok"] is False


async def test_to_fts_quotes_what_fts5_would_refuse():
    assert fts.to_fts("evil.example") == '"evil.example"'
    assert fts.to_fts("rm -rf") == 'rm "-rf"'
    assert fts.to_fts('"rm -rf" OR curl*') == '"rm -rf" OR curl*'
    assert fts.to_fts("sk-ant*") == '"sk-ant"*'
    with pytest.raises(fts.QuerySyntaxError):
        fts.to_fts('a"b')


async def test_the_home_page_search_box_uses_text_search(indexed_datasette):
    html = (await indexed_datasette.client.get("/")).text
    assert 'action="/-/capsem/search"' in html


# -- a copied home with planted secrets and hostile text ----------------------------------

SECRETS = {
    "anthropic": "sk-ant-api03-Zq7Wv8Xy9AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "github": "ghp_Zq7Wv8Xy9AbCdEfGhIjKlMnOpQrStUvWx01",
    "password": "hunter2Zq7Wv8",
    "aws": "AKIAZQ7WV8XY9ABCDEFG",
}
HOSTILE = f'<script>alert("pwn")</script><img src=x onerror=alert(2)> {MARK_OPEN}forged{MARK_CLOSE}'


@pytest.fixture(scope="module")
def planted(capsem_home, manifest, tmp_path_factory):
    """A copy of the home whose one ledger carries credentials and hostile text."""
    root = tmp_path_factory.mktemp("planted")
    home = root / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    session = next(
        s
        for s in readable(manifest)
        if s["era"] == "head" and s.get("clean") and s["kind"] == "ephemeral"
    )
    conn = sqlite3.connect(home / session["ledger"])
    conn.execute(
        "UPDATE model_calls SET text_content = ? WHERE id = (SELECT MIN(id) FROM model_calls)",
        (f"Use the key {SECRETS['anthropic']} for the plantedreply. {HOSTILE}",),
    )
    conn.execute(
        "INSERT INTO exec_events (timestamp, exec_id, command, stderr_preview) VALUES"
        " ('2026-08-09T10:00:00.000000Z', 9001, ?, ?)",
        (
            f"git clone https://x:{SECRETS['github']}@github.com/o/r plantedexec",
            f"export password={SECRETS['password']} AWS_KEY={SECRETS['aws']}",
        ),
    )
    conn.execute(
        "UPDATE tool_calls SET arguments = ? WHERE id = (SELECT MIN(id) FROM tool_calls)",
        (json.dumps({"token": SECRETS["github"], "note": "plantedtool"}),),
    )
    conn.commit()
    conn.close()
    return home, session, root


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def planted_instances(planted):
    home, _session, root = planted
    viewer = await make_datasette(home, root / "cache", index_refresh_seconds=0)
    get_state(viewer).index.refresh()
    # An operator who may see secrets shares the same masked index.
    operator = await make_datasette(
        home, root / "cache", index_refresh_seconds=0, view_secrets={"id": "root"}
    )
    return viewer, operator


def probes() -> list[str]:
    found = []
    for secret in SECRETS.values():
        found += [secret, f'"{secret}"', secret[:6] + "*", secret[:3] + "*", secret[-10:]]
        found += [w + "*" for w in re.findall(r"\w{3,}", secret)[:3]]
    return found + ["Zq7Wv8*", "zq7*", "hunter2*", "api03*", "AKIAZ*", '"sk-ant-api03"']


async def test_no_search_reveals_or_confirms_a_planted_credential(planted_instances, planted):
    viewer, operator = planted_instances
    for datasette, cookies in ((viewer, None), (operator, actor_cookies(operator, "root"))):
        for probe in probes():
            response = await datasette.client.get(
                f"/-/capsem/search.json?q={quote(probe)}", cookies=cookies
            )
            assert response.status_code in (200, 400), probe
            if response.status_code == 200:
                # The reader's own query is echoed back; nothing else may hold the secret.
                answer = json.dumps([response.json()["hits"], response.json()["text"]["hits"]])
                for secret in SECRETS.values():
                    assert secret not in answer and secret[-12:] not in answer, probe
                hits = response.json()["text"]["hits"]
                assert hits == [] or all("Zq7" not in h["snippet"] for h in hits), probe
                assert not any("zq7" in json.dumps(h).lower() for h in hits), probe
        # The rows are still found by their other words, masked.
        data = (
            await datasette.client.get("/-/capsem/search.json?q=plantedexec", cookies=cookies)
        ).json()
        assert data["text"]["total"] == 1
        assert "[redacted" in data["text"]["hits"][0]["snippet"]
        tool = (
            await datasette.client.get("/-/capsem/search.json?q=plantedtool", cookies=cookies)
        ).json()
        assert tool["text"]["total"] == 1 and SECRETS["github"] not in json.dumps(tool)


async def test_snippets_are_escaped_and_markers_cannot_be_forged(planted_instances):
    viewer, _ = planted_instances
    data = await text(viewer, "plantedreply")
    hit = data["text"]["hits"][0]
    assert not any(p["hit"] and "forged" in p["text"] for p in hit["snippet_parts"])
    html = (await viewer.client.get("/-/capsem/search?q=plantedreply")).text
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html
    assert "<mark>plantedreply</mark>" in html
    assert "<mark>forged" not in html
    html = (await viewer.client.get("/-/capsem/search?q=alert")).text
    assert "<script>alert" not in html and "<mark>alert</mark>" in html


async def test_refresh_reindexes_only_the_changed_ledger(planted, tmp_path):
    source, session, _root = planted
    home = tmp_path / "home"
    shutil.copytree(source, home, symlinks=True)
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    service = get_state(datasette).index
    service.refresh()
    before = index_rows(datasette, "SELECT COUNT(*) FROM text_rows")[0][0]
    conn = sqlite3.connect(home / session["ledger"])
    conn.execute(
        "INSERT INTO dns_events (timestamp, qname, qtype, qclass, rcode, decision) VALUES"
        " ('2026-08-09T11:00:00.000000Z', 'zebracorn.example', 1, 1, 5, 'denied')"
    )
    conn.commit()
    conn.close()
    report = service.refresh()
    assert report.indexed == [session["id"]]
    assert index_rows(datasette, "SELECT COUNT(*) FROM text_rows")[0][0] == before + 1
    data = await text(datasette, "zebracorn.example")
    assert [h["session_id"] for h in data["text"]["hits"]] == [session["id"]]
    assert data["text"]["hits"][0]["kind"] == "dns"
    shutil.rmtree((home / session["ledger"]).parent)
    service.catalog.refresh(force=True)
    service.refresh()
    assert (await text(datasette, "zebracorn.example"))["text"]["total"] == 0
    assert (await text(datasette, "plantedexec"))["text"]["total"] == 0
    check = sqlite3.connect(service.path)  # the FTS index matches its content table
    try:
        check.execute("INSERT INTO text_search(text_search, rank) VALUES('integrity-check', 1)")
    finally:
        check.close()


async def test_hide_free_text_limits_text_search_to_non_free_text_kinds(planted):
    home, _session, root = planted
    datasette = await make_datasette(
        home, root / "cache-hide", index_refresh_seconds=0, hide_free_text=True
    )
    get_state(datasette).index.refresh()
    data = await text(datasette, "plantedreply OR plantedexec OR api*", _size=200)
    assert data["text"]["restricted"] is True
    assert {h["kind"] for h in data["text"]["hits"]} <= {"file", "http", "dns", "security"}
    assert "plantedreply" not in json.dumps(data["text"]["hits"])
    # The grouping and the list's `matching` filter search the same kinds: a reply's words
    # find no session for this reader.
    replies = await text(datasette, "plantedreply", _size=200)
    assert replies["text"]["sessions"] == [] and replies["text"]["session_count"] == 0
    listed = await datasette.client.get("/-/capsem/sessions.json?matching=plantedreply&all=1")
    assert listed.status_code == 200 and listed.json()["sessions"] == []
    open_reader = await make_datasette(home, root / "cache-open", index_refresh_seconds=0)
    get_state(open_reader).index.refresh()
    seen = await open_reader.client.get("/-/capsem/sessions.json?matching=plantedreply&all=1")
    assert seen.json()["sessions"]  # the same words find it where free text is not hidden


# -- hits grouped by session, and the list filtered to them (issue 28 point 6) ----------


async def test_hits_are_grouped_by_session_with_counts(indexed_datasette):
    """Every hit of a query, counted per session, equals the grouping the page shows; the
    sessions are the distinct sessions of the hits, most hits first."""
    everything, page = await every_hit(indexed_datasette, "api* OR let")
    expected: dict[str, int] = {}
    for hit in everything:
        expected[hit["session_id"]] = expected.get(hit["session_id"], 0) + 1
    grouped = page["text"]["sessions"]
    assert {g["session_id"]: g["hits"] for g in grouped} == expected
    assert page["text"]["session_count"] == len(expected) > 1
    assert [g["hits"] for g in grouped] == sorted((g["hits"] for g in grouped), reverse=True)
    for g in grouped[:3]:  # each links its session, and its hits only
        assert (await indexed_datasette.client.get(g["session_href"])).status_code == 200
        narrowed = f"/-/capsem/search.json?{page['text']['narrowing']}&within={g['session_id']}"
        only = await indexed_datasette.client.get(narrowed)
        assert {h["session_id"] for h in only.json()["text"]["hits"]} == {g["session_id"]}


async def test_the_json_next_page_is_json(indexed_datasette):
    data = await text(indexed_datasette, "api* OR let", _size=5)
    assert data["text"]["next"].startswith("/-/capsem/search.json?")
    following = await indexed_datasette.client.get(data["text"]["next"])
    assert following.status_code == 200 and following.json()["text"]["offset"] == 5
    html = (await indexed_datasette.client.get("/-/capsem/search?q=api*+OR+let&_size=5")).text
    assert 'href="/-/capsem/search?q=api' in html  # the page's next page is a page


async def test_show_these_sessions_in_the_list(indexed_datasette):
    data = await text(indexed_datasette, "api* OR let", kind="dns")
    grouped = {g["session_id"] for g in data["text"]["sessions"]}
    assert grouped
    listed = await indexed_datasette.client.get(
        data["text"]["list_href"].replace("/-/capsem?", "/-/capsem/sessions.json?")
        + "&all=1"
        + "&_size=1000"
    )
    assert listed.status_code == 200, listed.text[:300]
    assert {s["id"] for s in listed.json()["sessions"]} == grouped
    assert listed.json()["filters"]["matching"] == "api* OR let"
    page = await indexed_datasette.client.get(data["text"]["list_href"])
    assert "Only the sessions with full-text hits" in page.text
    hits_page = await indexed_datasette.client.get("/-/capsem/search?q=api*+OR+let&kind=dns")
    assert "Show these" in hits_page.text and "[redacted" not in hits_page.text
    bad = await indexed_datasette.client.get('/-/capsem/sessions.json?matching="unclosed')
    assert bad.status_code == 400 and bad.json()["error"] == "Bad text filter"


async def test_the_list_box_and_the_search_box_are_told_apart(indexed_datasette):
    html = (await indexed_datasette.client.get("/")).text
    assert "Find in every session's text" in html and "Filter the list by id or name" in html
    empty = (await indexed_datasette.client.get("/-/capsem?q=let")).text
    assert "0 of" in empty
    assert 'href="/-/capsem/search?q=let"' in empty  # the hint to search the text
    found = (await indexed_datasette.client.get("/-/capsem/search.json?q=let")).json()
    assert found["text"]["total"] > 0


SNIPPET_QUERIES = ("a*", "s*", "re*", '"rm -rf"', "GET", "api OR dns", "NEAR(model call)", "exa*")


async def test_snippets_cut_from_the_shown_rows_equal_fts5s_over_the_whole_index(indexed_datasette):
    """Each hit's snippet comes from its own row matched again in a small table; it is the
    snippet FTS5 gives the same row in the whole index, for words, prefixes, phrases, OR and
    NEAR."""
    conn = sqlite3.connect(f"file:{get_state(indexed_datasette).index.path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    compared = 0
    try:
        for query in SNIPPET_QUERIES:
            result = fts.search(conn, query, limit=40)
            for hit in result.hits:
                expected = conn.execute(
                    "SELECT snippet(text_search, 0, ?, ?, '…', ?) FROM text_search "
                    "WHERE text_search MATCH ? AND rowid = ?",
                    (MARK_OPEN, MARK_CLOSE, fts.SNIPPET_TOKENS, result.fts_query, hit["doc_id"]),
                ).fetchone()[0]
                assert hit["snippet_parts"] == fts.split_snippet(expected), (query, hit)
                compared += 1
    finally:
        conn.close()
    assert compared > 100


async def test_a_prefix_matching_more_than_the_bound_ranks_the_first_matches_and_says_so(
    indexed_datasette, monkeypatch
):
    """A prefix search over more matches than RANK_BOUND ranks the first RANK_BOUND matches
    only: the JSON says it is partial, the page says so, and it pages through those alone. A
    word, however many rows hold it, is still ranked over every match."""
    everything = (await text(indexed_datasette, "s*", _size=200))["text"]
    assert everything["total"] > 30 and not everything["partial"]
    monkeypatch.setattr(fts, "RANK_BOUND", 12)
    bounded = (await text(indexed_datasette, "s*", _size=5))["text"]
    assert bounded["partial"] is True and bounded["ranked"] == 12
    assert bounded["total"] == everything["total"]  # the count is still of every match
    ids = [hit["doc_id"] for hit in bounded["hits"]]
    first = [
        hit["doc_id"] for hit in (await text(indexed_datasette, "s*", _size=12))["text"]["hits"]
    ]
    assert ids == first[:5] and len(first) == 12
    pages, url = [], bounded["next"]
    while url:  # 12 ranked hits: pages of 5, 5 and 2, then no next page
        page = (await indexed_datasette.client.get(url.replace("/search?", "/search.json?"))).json()
        pages.append(len(page["text"]["hits"]))
        url = page["text"]["next"]
    assert pages == [5, 2]
    html = await indexed_datasette.client.get("/-/capsem/search?" + urlencode({"q": "s*"}))
    assert "Showing the best of the first 12 matches only" in html.text
    words = [
        w
        for w in ("GET", "api", "model")
        if (await text(indexed_datasette, w))["text"]["total"] > 12
    ]
    assert words, "no word matches more rows than the bound"
    for word in words:
        found = (await text(indexed_datasette, word, _size=5))["text"]
        assert found["partial"] is False and found["ranked"] is None
    quiet = await indexed_datasette.client.get("/-/capsem/search?" + urlencode({"q": words[0]}))
    assert "Showing the best of the first" not in quiet.text
