"""A trace's JSON answers kept in the plugin's cache (views/trace_cache.py): read back by a
restarted server, each for its own reader policy only, never once the ledger changed, and
never written into the Capsem home."""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from datasette_capsem.state import get_state
from datasette_capsem.views import trace as trace_view
from datasette_capsem.views.trace_cache import trace_store
from tests.helpers import actor_cookies, make_datasette
from tests.trace_support import clean_current, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")
FIRST = "sk-ant-api03-STOREDFIRST0123456789abcdef"
SECOND = "ghp_STOREDSECOND0123456789abcdefghijklmn"
ANSWERS = ("/tree.json", "/graph.json", "/picture.json", "/conversation.json")


@pytest.fixture(scope="module")
def planted(capsem_home, manifest, tmp_path_factory):
    home = tmp_path_factory.mktemp("trace-store") / "home"
    shutil.copytree(capsem_home, home, symlinks=True)
    session = clean_current(manifest)[0]
    set_tool_name(home / session["ledger"], FIRST)
    with sqlite3.connect(f"file:{home / session['ledger']}?immutable=1", uri=True) as conn:
        trace = conn.execute(
            "SELECT trace_id FROM tool_calls WHERE trace_id IS NOT NULL ORDER BY id LIMIT 1"
        ).fetchone()[0]
    return home, session, trace


def set_tool_name(ledger: Path, name: str) -> None:
    conn = sqlite3.connect(ledger)
    try:
        conn.execute(
            "UPDATE tool_calls SET tool_name = ? WHERE id = "
            "(SELECT MIN(id) FROM tool_calls WHERE trace_id IS NOT NULL)",
            (name,),
        )
        conn.commit()
    finally:
        conn.close()


def snapshot(home: Path) -> dict[str, tuple[int, int, str]]:
    return {
        str(path.relative_to(home)): (
            path.stat().st_size,
            path.stat().st_mtime_ns,
            hashlib.blake2b(path.read_bytes()).hexdigest(),
        )
        for path in sorted(home.rglob("*"))
        if path.is_file()
    }


async def server(home: Path, cache: Path):
    return await make_datasette(home, cache, view_secrets={"id": "operator"})


async def answers(datasette, session, trace) -> dict[tuple[str, bool], bytes]:
    """Each answer for a masked reader and for the operator."""
    operator = actor_cookies(datasette, "operator")
    found = {}
    for suffix in ANSWERS:
        url = trace_url(session["id"], trace, suffix)
        for shown in (False, True):
            response = await datasette.client.get(url, cookies=operator if shown else None)
            assert response.status_code == 200, (suffix, response.text[:300])
            found[suffix, shown] = response.content
    return found


async def saved(datasette, count: int) -> None:
    """Wait for the background saves (the deadline only bounds a hang)."""
    store = trace_store(datasette)
    deadline = time.monotonic() + 60
    while store.saved < count and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert store.saved >= count


async def test_a_restarted_server_reads_each_policy_its_own_answer(planted, tmp_path):
    home, session, trace = planted
    before = snapshot(home)
    first = await server(home, tmp_path / "cache")
    built = await answers(first, session, trace)
    await saved(first, 2 * len(ANSWERS))
    for suffix in ANSWERS:
        assert b"STOREDFIRST" not in built[suffix, False]
        assert b"STOREDFIRST" in built[suffix, True] or suffix == "/conversation.json"
    again = await server(home, tmp_path / "cache")
    assert await answers(again, session, trace) == built
    assert trace_store(again).loaded == 2 * len(ANSWERS)  # read back, none built
    assert snapshot(home) == before  # nothing written into the Capsem home


async def test_an_answer_stored_for_another_policy_is_never_served(planted, tmp_path):
    home, session, trace = planted
    cache = tmp_path / "cache"
    first = await server(home, cache)
    operator = actor_cookies(first, "operator")
    for suffix in ANSWERS:
        await first.client.get(trace_url(session["id"], trace, suffix), cookies=operator)
    await saved(first, len(ANSWERS))
    directory = trace_store(first).directory
    assert cache in directory.parents  # the plugin's cache, not the home
    shown = {path.name: path.read_bytes() for path in directory.iterdir()}
    await answers(first, session, trace)
    await saved(first, 2 * len(ANSWERS))
    # Every file the masked answers were stored in now holds an operator's answer instead.
    operator_bytes = next(iter(shown.values()))
    for path in directory.iterdir():
        if path.name not in shown:
            path.write_bytes(operator_bytes)
    again = await server(home, cache)
    for suffix in ANSWERS:
        masked = await again.client.get(trace_url(session["id"], trace, suffix))
        assert b"STOREDFIRST" not in masked.content
    assert trace_store(again).loaded == 0


async def test_the_page_prepares_its_tree_and_picture(planted, tmp_path):
    home, session, trace = planted
    datasette = await server(home, tmp_path / "cache")
    page = await datasette.client.get(trace_url(session["id"], trace))
    assert page.status_code == 200
    await asyncio.gather(*trace_view._preparing.values())
    traces = get_state(datasette).traces
    hits, held = traces.hits, len(traces)
    for suffix in ("/tree.json", "/picture.json"):
        response = await datasette.client.get(trace_url(session["id"], trace, suffix))
        assert b"STOREDFIRST" not in response.content
    assert traces.hits >= hits + 2 and len(traces) == held  # what the page prepared, none built


async def test_answers_prepared_with_the_page_are_the_answers_built_alone(planted, tmp_path):
    """The page's tree and picture, built by its preparation (tree first, the picture's fetch
    waiting for it, the texts both mask shared), are the bytes each answer has when built
    alone, and stay masked."""
    home, session, trace = planted
    prepared = await server(home, tmp_path / "prepared")
    assert (await prepared.client.get(trace_url(session["id"], trace))).status_code == 200
    fetched = await asyncio.gather(
        *(prepared.client.get(trace_url(session["id"], trace, s)) for s in reversed(ANSWERS))
    )
    alone = await server(home, tmp_path / "alone")
    for suffix, response in zip(reversed(ANSWERS), fetched, strict=True):
        single = await alone.client.get(trace_url(session["id"], trace, suffix))
        get_state(alone).traces._entries.clear()  # noqa: SLF001 - each built from nothing
        assert response.status_code == single.status_code == 200
        assert response.content == single.content, suffix
        assert b"STOREDFIRST" not in response.content
    assert b"[redacted:api-key]" in fetched[list(reversed(ANSWERS)).index("/picture.json")].content
    await asyncio.gather(*trace_view._preparing.values())


def page_text(response) -> str:
    """A page's HTML without its per-request CSRF token."""
    assert response.status_code == 200
    return re.sub(r'name="csrftoken" value="[^"]*"', "", response.text)


async def test_a_restarted_server_draws_the_page_without_building_the_graph(planted, tmp_path):
    home, session, trace = planted
    url = trace_url(session["id"], trace)
    first = await server(home, tmp_path / "cache")
    pages = {}
    for shown in (False, True):
        operator = actor_cookies(first, "operator") if shown else None
        pages[shown] = page_text(await first.client.get(url, cookies=operator))
        await asyncio.gather(*trace_view._preparing.values())
    await saved(first, 6)  # the page's facts, tree and picture, for each policy
    assert "STOREDFIRST" not in pages[False]
    again = await server(home, tmp_path / "cache")
    for shown in (False, True):
        operator = actor_cookies(again, "operator") if shown else None
        assert page_text(await again.client.get(url, cookies=operator)) == pages[shown]
        await asyncio.gather(*trace_view._preparing.values())
        for suffix in ("/tree.json", "/picture.json"):
            answer = await again.client.get(
                trace_url(session["id"], trace, suffix), cookies=operator
            )
            assert answer.status_code == 200
    assert trace_store(again).loaded == 6
    built = get_state(again).traces._entries  # noqa: SLF001 - what the restarted server built
    assert not [key for key in built if key[-1] == "graph"]  # read back, the graph not built


async def test_a_changed_ledger_is_read_again(planted, tmp_path):
    home, session, trace = planted
    first = await server(home, tmp_path / "cache")
    await answers(first, session, trace)
    await saved(first, 2 * len(ANSWERS))
    set_tool_name(home / session["ledger"], SECOND)
    again = await server(home, tmp_path / "cache")
    changed = await answers(again, session, trace)
    for suffix in ("/tree.json", "/graph.json"):
        assert b"STOREDFIRST" not in changed[suffix, True]
        assert b"STOREDSECOND" in changed[suffix, True]
        assert b"STORED" not in changed[suffix, False]
        assert b"[redacted:api-key]" in changed[suffix, False]
    assert trace_store(again).loaded == 0
