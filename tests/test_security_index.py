"""What policy stopped or flagged, across sessions: the index's `policy_events`, the
`/-/capsem/security` page and its JSON, and the `policy_by_day` canned query.

Every figure is compared with counts made here, row by row in Python over the generated
ledgers (every era), a fork's rows copied from its parent left out by event id. Blocked tools
and detections the generator does not write are planted, as a writer would, with hostile text.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest
import pytest_asyncio

from datasette_capsem.readonly import open_readonly
from datasette_capsem.state import get_state
from tests.helpers import make_datasette, session_in, sessions_in
from tests.test_index import distinct_files, fork_parent

async_test = pytest.mark.asyncio(loop_scope="session")
SCRATCH = Path(tempfile.mkdtemp(prefix="capsem-security-test-"))
HOSTILE = "<img src=x onerror=alert(1)>.evil.example"
SECRET = "sk-ant-api03-" + "Q7w" * 15


@pytest.fixture(scope="module")
def home(capsem_home, manifest, tmp_path_factory) -> Path:
    """A copy of the home with `plant`'s rows in `planted_session`'s ledger (read only)."""
    path = tmp_path_factory.mktemp("security") / "home"
    shutil.copytree(capsem_home, path, symlinks=True)
    plant(path / planted_session(manifest)["ledger"])
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def security(home, tmp_path_factory):
    """A started Datasette over `home` whose index is built, shared by the tests that read."""
    datasette = await make_datasette(home, tmp_path_factory.mktemp("security-cache"))
    get_state(datasette).index.refresh()
    return datasette


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def ms_day(ms) -> str:
    return datetime.fromtimestamp(int(ms) / 1000, tz=timezone.utc).strftime("%Y-%m-%d")


def policy_rows(conn: sqlite3.Connection) -> list[tuple[str, tuple, str, str]]:
    """(table, row key, category, day) of every row policy stopped or flagged, read one by one."""
    found = []
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def rows(table: str, *wanted: str):
        have = columns(conn, table)
        picked = [c if c in have else "NULL" for c in ("event_id", "id", "timestamp", *wanted)]
        yield from conn.execute(f'SELECT {", ".join(picked)} FROM "{table}"')

    for table in ("net_events", "dns_events"):
        if table in tables and "decision" in columns(conn, table):
            for eid, rid, ts, decision in rows(table, "decision"):
                if decision == "denied":
                    found.append((table, (eid, rid, ts), "denied_domain", (ts or "")[:10] or None))
    for table in ("tool_calls", "mcp_calls"):
        if table in tables:
            for eid, rid, ts, decision, action in rows(table, "decision", "policy_action"):
                if decision in ("denied", "blocked") or action == "block":
                    found.append((table, (eid, rid, ts), "blocked_tool", (ts or "")[:10] or None))
    if "security_rule_events" in tables:
        for eid, rid, _, level, ms in rows(
            "security_rule_events", "detection_level", "timestamp_unix_ms"
        ):
            if level is not None and level != "none":
                found.append(("security_rule_events", (eid, rid, ms), "detection", ms_day(ms)))
    if "substitution_events" in tables:
        for eid, rid, ts in rows("substitution_events"):
            found.append(("substitution_events", (eid, rid, ts), "credential", ts[:10]))
    return found


def read(path: Path) -> list:
    # Through the read-only opener (a .gz is decompressed, a WAL kept): the counting is ours.
    conn = open_readonly(path, SCRATCH)
    try:
        return policy_rows(conn)
    finally:
        conn.close()


def expected(manifest: dict, home: Path, indexed: set[str]) -> dict[str, Counter]:
    """Per session, Counter of (category, day): a fork's own rows only (event id not in its
    parent's same table; rows without one by id and time)."""
    result = {}
    for session in distinct_files(manifest, indexed):
        rows = read(home / session["ledger"])
        if session.get("forked_from"):
            parent = read(home / fork_parent(manifest, session)["ledger"])
            inherited = {
                (t, key[0]) if key[0] not in (None, "", "000000000000") else (t, key)
                for t, key, _, _ in parent
            }
            rows = [
                r
                for r in rows
                if ((r[0], r[1][0]) if r[1][0] not in (None, "", "000000000000") else (r[0], r[1]))
                not in inherited
            ]
        result[session["id"]] = Counter((category, day) for _, _, category, day in rows)
    return result


def plant(ledger: Path) -> None:
    """Blocked tools, detections and a hostile denied domain, written as a writer would."""
    conn = sqlite3.connect(ledger, isolation_level=None)
    conn.execute(
        "INSERT INTO tool_calls (event_id, timestamp, provider, status, call_index, call_id,"
        " tool_name, arguments, origin, decision, policy_action, policy_rule)"
        " VALUES ('b10c0000000' || ?, ?, '', 'requested', 0, ?, ?, '{}', 'mcp', 'denied',"
        " 'block', 'tools.block.shell')",
        ("1", "2026-08-02T10:00:00Z", "c1", f"shell__rm_rf {SECRET}"),
    )
    conn.execute(
        "INSERT INTO security_rule_events (timestamp_unix_ms, event_id, event_type, rule_id,"
        " rule_action, detection_level, rule_json, event_json)"
        " VALUES (?, 'de7ec7000001', 'process.exec', ?, 'block', 'high', '{}', '{}')",
        (1785664800000, "detect.exfil.<b>curl</b>"),
    )
    conn.execute(
        "INSERT INTO net_events (event_id, timestamp, domain, decision)"
        " VALUES ('de41ed000001', '2026-08-02T11:00:00Z', ?, 'denied')",
        (HOSTILE,),
    )
    conn.close()


def planted_session(manifest: dict) -> dict:
    return session_in(
        manifest, era="head", has=("clean", "ledger"), lacks=("forked_from", "alias_of", "live")
    )


def figures(data: dict) -> tuple[dict, Counter]:
    by_session: dict[str, Counter] = {}
    for row in data["by_session"]:
        by_session.setdefault(row["session_id"], Counter())[row["category"]] += row["events"]
    by_day = Counter({(r["category"], r["day"]): r["events"] for r in data["by_day"]})
    return by_session, by_day


@async_test
async def test_every_figure_matches_independent_counts(home, manifest, security):
    datasette = security
    service = get_state(datasette).index
    indexed = {sid for sid, row in service.snapshot().ledgers.items() if not row["problem"]}
    truth = expected(manifest, home, indexed)
    response = await datasette.client.get("/-/capsem/security.json")
    assert response.status_code == 200
    by_session, by_day = figures(response.json())
    want_session = {
        sid: Counter(
            {
                c: sum(n for (cat, _), n in truth[sid].items() if cat == c)
                for c in {cat for cat, _ in truth[sid]}
            }
        )
        for sid in truth
        if truth[sid]
    }
    assert by_session == want_session
    want_day = Counter()
    for found in truth.values():
        want_day.update(found)
    assert by_day == +want_day
    assert {c for c, _ in want_day} == {"denied_domain", "blocked_tool", "detection", "credential"}
    forks = sessions_in(manifest, has=("forked_from",), where=lambda s: s["id"] in indexed)
    assert forks  # the fork rule was exercised
    # Sessions per day and category: distinct sessions with such rows that day.
    sessions_per_day = Counter()
    for found in truth.values():
        for key in found:
            sessions_per_day[key] += 1
    got = {(r["category"], r["day"]): r["sessions"] for r in response.json()["by_day"]}
    assert got == dict(sessions_per_day)
    # The same figures in SQL: the canned query over the index database.
    canned = await datasette.client.get(
        "/index/policy_by_day.json",
        params={"since": "", "until": "", "category": "", "_shape": "array"},
    )
    assert canned.status_code == 200
    assert Counter({(r["category"], r["day"]): r["events"] for r in canned.json()}) == by_day


@async_test
async def test_filters_and_hostile_values(manifest, security):
    target = planted_session(manifest)
    datasette = security
    day = "2026-08-02"
    one = await datasette.client.get(
        "/-/capsem/security.json", params={"since": day, "until": day, "category": "detection"}
    )
    data = one.json()
    assert {r["day"] for r in data["by_day"]} == {day}
    assert {r["category"] for r in data["by_day"]} == {"detection"}
    assert any(r["session_id"] == target["id"] for r in data["by_session"])
    html = await datasette.client.get("/-/capsem/security")
    assert html.status_code == 200
    assert "<img src=x" not in html.text and "&lt;img src=x onerror=alert(1)&gt;" in html.text
    assert "<b>curl</b>" not in html.text
    for response in (html, await datasette.client.get("/-/capsem/security.json")):
        assert SECRET not in response.text and SECRET[:24] not in response.text
    assert (await datasette.client.get("/-/capsem/security.json?days=100000")).status_code == 200
    for bad in ("since=yesterday", "until=2026-13", "category=nope", "days=-1", "days=x"):
        response = await datasette.client.get(f"/-/capsem/security.json?{bad}")
        assert response.status_code == 400, bad


@async_test
async def test_a_changed_ledger_re_extracts_only_itself(home, manifest, tmp_path):
    target = planted_session(manifest)
    home = shutil.copytree(home, tmp_path / "home", symlinks=True)  # this test writes
    datasette = await make_datasette(home, tmp_path / "cache")
    service = get_state(datasette).index
    service.refresh()
    before, _ = figures(service.security())
    conn = sqlite3.connect(home / target["ledger"], isolation_level=None)
    conn.execute(
        "INSERT INTO dns_events (event_id, timestamp, qname, qtype, qclass, rcode, decision,"
        " source_proto) VALUES ('d00d00000001', '2026-08-03T09:00:00Z', 'blocked.example',"
        " 1, 1, 3, 'denied', 'udp')"
    )
    conn.close()
    report = service.refresh()
    assert report.indexed == [target["id"]]
    after, _ = figures(service.security())
    assert after[target["id"]]["denied_domain"] == before[target["id"]]["denied_domain"] + 1
    assert {k: v for k, v in after.items() if k != target["id"]} == {
        k: v for k, v in before.items() if k != target["id"]
    }


def form_values(html: str) -> dict[str, str]:
    """What the filter form's inputs hold, as a browser would submit them on Apply."""
    form = html.split('<form method="get" class="capsem-search">', 1)[1].split("</form>", 1)[0]
    values = dict(re.findall(r'<input type="text" name="(\w+)" value="([^"]*)"', form))
    values["category"] = ""
    return values


@async_test
async def test_the_unfiltered_page_applies_as_it_is(security):
    """Since used to be pre-filled with the text "None", so Apply answered 400."""
    datasette = security
    page = await datasette.client.get("/-/capsem/security")
    values = form_values(page.text)
    assert values["since"] == "" and values["until"] == "" and values["days"] == ""
    applied = await datasette.client.get("/-/capsem/security", params=values)
    assert applied.status_code == 200, applied.text[:300]


@async_test
async def test_the_home_pages_link_shows_the_newest_week_with_events(security):
    """The link was `?days=7`: empty whenever the newest data is older than a week (the
    generated home's is months old)."""
    datasette = security
    everything = (await datasette.client.get("/-/capsem/security.json")).json()
    newest = max(r["day"] for r in everything["by_day"] if r["day"])
    front = await datasette.client.get("/-/capsem/")
    (href,) = re.findall(r'href="(/-/capsem/security\?[^"]*)"', front.text)
    page = await datasette.client.get(href.replace("&amp;", "&"))
    assert page.status_code == 200
    assert "Nothing was stopped or flagged" not in page.text
    data = (await datasette.client.get(href.replace("security?", "security.json?"))).json()
    assert max(r["day"] for r in data["by_day"]) == newest
    values = form_values(page.text)
    assert values["until"] == newest and values["since"] <= newest
    assert (await datasette.client.get("/-/capsem/security", params=values)).status_code == 200
    bad = await datasette.client.get("/-/capsem/security.json?latest=x")
    assert bad.status_code == 400 and "latest" in bad.text


@async_test
async def test_each_session_row_links_to_the_ledger_rows_it_summarises(home, manifest, security):
    """The by-session rows linked only to the session page, never to its net_events rows."""
    datasette = security
    data = (await datasette.client.get("/-/capsem/security.json")).json()
    denied = [r for r in data["by_session"] if r["category"] == "denied_domain"]
    assert denied
    followed = 0
    for row in denied:
        assert row["rows"], row
        for link in row["rows"]:
            assert link["table"] in ("net_events", "dns_events")
            assert link["href"].startswith(f"/{row['session_id']}/{link['table']}?")
        http = [link for link in row["rows"] if link["table"] == "net_events"]
        if http and followed < 3:
            followed += 1
            listed = await datasette.client.get(
                http[0]["href"].replace("/net_events?", "/net_events.json?")
                + "&_shape=array&_size=max"
            )
            assert listed.status_code == 200
            assert listed.json() and {r["decision"] for r in listed.json()} == {"denied"}
    assert followed
    for row in data["by_session"]:  # every category's links open (no 400 on a filter)
        for link in row["rows"]:
            path, _, query = link["href"].partition("?")
            opened = await datasette.client.get(f"{path}.json?{query}")
            assert opened.status_code == 200, (link, opened.text[:300])
            assert opened.json()["rows"], link
    page = await datasette.client.get("/-/capsem/security")
    first = next(link for r in denied for link in r["rows"])
    assert f'href="{first["href"].replace("&", "&amp;")}"' in page.text
