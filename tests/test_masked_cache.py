"""Masked tree.json, graph.json and picture.json are built once per ledger version: the cached answer is the
masked one (never the operator's), each policy has its own, and a changed ledger is read
again."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
import pytest_asyncio

from tests.helpers import actor_cookies, make_datasette
from tests.trace_support import clean_current, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")
FIRST = "sk-ant-api03-PLANTEDFIRST0123456789abcdef"
SECOND = "ghp_PLANTEDSECOND0123456789abcdefghijklmn"


@pytest.fixture(scope="module")
def planted(capsem_home, manifest, tmp_path_factory):
    home = tmp_path_factory.mktemp("masked-cache") / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    session = clean_current(manifest)[0]
    conn = sqlite3.connect(home / session["ledger"])
    try:
        row_id, trace = conn.execute(
            "SELECT id, trace_id FROM tool_calls WHERE trace_id IS NOT NULL ORDER BY id LIMIT 1"
        ).fetchone()
        conn.execute("UPDATE tool_calls SET tool_name = ? WHERE id = ?", (FIRST, row_id))
        conn.commit()
    finally:
        conn.close()
    return home, session, trace, row_id


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def datasette(planted, tmp_path_factory):
    return await make_datasette(
        planted[0],
        tmp_path_factory.mktemp("masked-cache-cache"),
        index_refresh_seconds=0,
        view_secrets={"id": "operator"},
    )


async def test_cached_answers_stay_masked_and_follow_the_ledger(datasette, planted):
    home, session, trace, row_id = planted
    operator = actor_cookies(datasette, "operator")
    for suffix in ("/tree.json", "/graph.json", "/picture.json"):
        url = trace_url(session["id"], trace, suffix)
        first = await datasette.client.get(url)
        again = await datasette.client.get(url)
        assert first.status_code == again.status_code == 200
        assert first.content == again.content
        assert b"PLANTEDFIRST" not in first.content and b"[redacted:api-key]" in first.content
        shown = await datasette.client.get(url, cookies=operator)
        assert b"PLANTEDFIRST" in shown.content  # the operator's answer is not the cached one
        assert b"PLANTEDFIRST" not in (await datasette.client.get(url)).content
    conn = sqlite3.connect(home / session["ledger"])
    try:
        conn.execute("UPDATE tool_calls SET tool_name = ? WHERE id = ?", (SECOND, row_id))
        conn.commit()
    finally:
        conn.close()
    for suffix in ("/tree.json", "/graph.json", "/picture.json"):
        url = trace_url(session["id"], trace, suffix)
        changed = await datasette.client.get(url)
        assert b"PLANTED" not in changed.content
        assert b"[redacted:api-key]" in changed.content  # the new value, masked
        assert b"PLANTEDSECOND" in (await datasette.client.get(url, cookies=operator)).content


async def test_a_credential_cut_by_a_preview_is_masked(planted, tmp_path):
    """Trace pages read long cells as 240-character previews; a token straddling the cut is
    masked from what is left of it (the preview says it was cut)."""
    home, session, trace, row_id = planted
    token = "ghp_PLANTEDPREVIEW0123456789abcdefghijkl"
    arguments = '{"command": "' + "x" * (240 - 13 - 13) + " " + token + '"}'
    conn = sqlite3.connect(home / session["ledger"])
    try:
        conn.execute("UPDATE tool_calls SET arguments = ? WHERE id = ?", (arguments, row_id))
        conn.commit()
    finally:
        conn.close()
    datasette = await make_datasette(home, tmp_path / "cache", index_refresh_seconds=0)
    found = False
    for suffix in (".json", "/graph.json", "/picture.json", "/tree.json", ".otlp.json"):
        body = (await datasette.client.get(trace_url(session["id"], trace, suffix))).text
        assert "PLANTEDP" not in body, suffix
        found = found or "ghp_[redacted" in body or "[redacted:api-key]" in body
    assert found, "the cut token is shown, masked, somewhere on the trace's pages"
