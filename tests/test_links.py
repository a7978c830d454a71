"""Every id is a link, both ways: Datasette's table, row and canned-query pages of a ledger link
ids to the plugin's pages (a `render_cell` hook), and event pages link a row to the rows its
ids join (a model call's tool calls and responses; a tool call's emitter, answers, consumers).
"""

from __future__ import annotations

import re
import sqlite3
from html import unescape
from pathlib import Path

import pytest

from datasette_capsem.readonly import open_readonly
from datasette_capsem.state import get_state
from tests.helpers import session_in

pytestmark = pytest.mark.asyncio(loop_scope="session")
LINK = re.compile(r'<a href="([^"]+)">([^<]*)</a>')


@pytest.fixture(scope="module")
def session(manifest) -> dict:
    return session_in(manifest, era="head", kind="ephemeral", status="stopped", has=("clean",))


def ledger_rows(home: Path, session: dict, sql: str, tmp_path: Path) -> list[dict]:
    conn = open_readonly(home / session["ledger"], tmp_path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def cell_links(html: str, column: str) -> list[tuple[str, str]]:
    cells = re.findall(rf'<td class="col-{column}[^"]*"[^>]*>(.*?)</td>', html, re.S)
    return [(unescape(m.group(1)), unescape(m.group(2))) for c in cells if (m := LINK.search(c))]


async def test_table_pages_link_ids_to_the_plugin_pages(datasette, capsem_home, session, tmp_path):
    sid = session["id"]
    call = ledger_rows(
        capsem_home,
        session,
        "SELECT * FROM tool_calls WHERE model_call_id IS NOT NULL ORDER BY id LIMIT 1",
        tmp_path,
    )[0]
    page = await datasette.client.get(f"/{sid}/tool_calls?id={call['id']}")
    assert page.status_code == 200
    base = f"/-/capsem/sessions/{sid}"
    assert cell_links(page.text, "event_id") == [
        (f"{base}/events/{call['event_id']}", call["event_id"])
    ]
    assert cell_links(page.text, "trace_id") == [
        (f"{base}/traces/{call['trace_id']}", call["trace_id"])
    ]
    model_href, text = cell_links(page.text, "model_call_id")[0]
    assert text == str(call["model_call_id"])
    model = ledger_rows(
        capsem_home, session, f"SELECT event_id FROM model_calls WHERE id = {int(text)}", tmp_path
    )[0]
    redirect = await datasette.client.get(model_href)  # model_call_id -> its model call
    assert redirect.status_code == 302
    assert redirect.headers["location"] == f"{base}/events/{model['event_id']}"
    call_href, _ = cell_links(page.text, "call_id")[0]
    to_call = await datasette.client.get(call_href)
    assert to_call.headers["location"] == f"{base}/events/{call['event_id']}"

    row_page = await datasette.client.get(f"/{sid}/tool_calls/{call['id']}")
    assert f'href="{base}/events/{call["event_id"]}"' in row_page.text


async def test_a_responses_call_id_leads_to_its_call(datasette, capsem_home, session, tmp_path):
    sid = session["id"]
    pair = ledger_rows(
        capsem_home,
        session,
        "SELECT r.id, c.event_id FROM tool_responses r JOIN tool_calls c"
        " ON c.call_id = r.call_id AND c.trace_id = r.trace_id ORDER BY r.id LIMIT 1",
        tmp_path,
    )[0]
    page = await datasette.client.get(f"/{sid}/tool_responses?id={pair['id']}")
    href, _ = cell_links(page.text, "call_id")[0]
    response = await datasette.client.get(href)
    assert response.headers["location"] == f"/-/capsem/sessions/{sid}/events/{pair['event_id']}"


async def test_canned_query_results_link_ids(datasette, session):
    sid = session["id"]
    trace = next(t for t in session["traces"] if "-" in t)
    page = await datasette.client.get(f"/{sid}/trace_chain?trace_id={trace}")
    assert page.status_code == 200
    links = {href for href, _ in LINK.findall(page.text)}
    assert f"/-/capsem/sessions/{sid}/traces/{trace}" in links
    assert any(h.startswith(f"/-/capsem/sessions/{sid}/events/") for h in links)


async def test_the_index_links_session_ids(datasette):

    get_state(datasette).index.refresh()
    page = await datasette.client.get("/index/session_findings")
    links = cell_links(page.text, "session_id")
    assert links and all(h == f"/-/capsem/sessions/{t}" for h, t in links)


async def test_event_pages_show_relations(datasette, capsem_home, session, tmp_path):
    sid = session["id"]
    base = f"/-/capsem/sessions/{sid}"
    row = ledger_rows(
        capsem_home,
        session,
        "SELECT c.event_id AS call_event, c.call_id, m.event_id AS model_event,"
        " r.id AS response_id, m2.event_id AS consumer_event"
        " FROM tool_calls c JOIN model_calls m ON m.id = c.model_call_id"
        " JOIN tool_responses r ON r.call_id = c.call_id AND r.trace_id = c.trace_id"
        " JOIN model_calls m2 ON m2.id = r.model_call_id ORDER BY c.id LIMIT 1",
        tmp_path,
    )[0]
    call_page = (await datasette.client.get(f"{base}/events/{row['call_event']}")).text
    relations = re.search(r'<ul class="capsem-relations">(.*?)</ul>', call_page, re.S).group(1)
    assert f'emitted by model call: <a href="{base}/events/{row["model_event"]}">' in relations
    assert f'answered by: <a href="/{sid}/tool_responses/{row["response_id"]}">' in relations
    assert f'consumed by model call: <a href="{base}/events/{row["consumer_event"]}">' in relations
    model_page = (await datasette.client.get(f"{base}/events/{row['model_event']}")).text
    assert (
        f'emitted tool call: <a href="{base}/events/{row["call_event"]}"><code>{row["call_id"]}'
        in model_page
    )
    consumer = (await datasette.client.get(f"{base}/events/{row['consumer_event']}")).text
    assert (
        f'carried the response: <a href="/{sid}/tool_responses/{row["response_id"]}">' in consumer
    )


async def test_an_unanswered_call_says_so(datasette, capsem_home, manifest, tmp_path):
    defect = next(d for d in manifest["defects"] if d["kind"] == "tool_call_without_response")
    session = session_in(manifest, id=defect["session"])
    event = ledger_rows(
        capsem_home,
        session,
        f"SELECT event_id FROM tool_calls WHERE id = {defect['row_id']}",
        tmp_path,
    )[0]["event_id"]
    page = await datasette.client.get(f"/-/capsem/sessions/{session['id']}/events/{event}")
    assert "answered by: <em>no response in this session</em>" in page.text


async def test_unknown_call_ids_and_rows_answer_404(datasette, session):
    base = f"/-/capsem/sessions/{session['id']}"
    assert (await datasette.client.get(f"{base}/tool-calls/%3Cscript%3E")).status_code == 404
    assert (await datasette.client.get(f"{base}/rows/no_table/1")).status_code == 404
    assert (await datasette.client.get(f"{base}/rows/model_calls/x")).status_code == 400


async def test_a_row_that_does_not_exist_gets_the_plugins_page_with_a_way_back(datasette, session):
    """Datasette's bare "Error 404 Record not found" had no way back to the session."""
    sid = session["id"]
    response = await datasette.client.get(f"/{sid}/net_events/99999999")
    assert response.status_code == 404
    assert "capsem-error-message" in response.text
    assert "net_events" in response.text and "99999999" in response.text
    assert f'href="/-/capsem/sessions/{sid}"' in response.text
    assert f'href="/{sid}/net_events"' in response.text
    as_json = await datasette.client.get(f"/{sid}/net_events/99999999.json")
    assert as_json.status_code == 404
    # A database that is not a Capsem session's keeps Datasette's own answer.
    assert (await datasette.client.get("/index/ledgers/no-such-row")).status_code == 404
