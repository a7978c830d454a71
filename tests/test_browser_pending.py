"""A big ledger's page answered 202 "being computed" (views/pending.py) in headless Chromium:
the page says so and reloads itself into the real page once the answer is there, with no
script error on the way."""

from __future__ import annotations

import pytest

from datasette_capsem.mount import ledger_db
from datasette_capsem.views import pending
from datasette_capsem.views import trace as trace_view
from tests.browser import live_server
from tests.trace_support import clean_current, trace_url

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def test_a_202_trace_page_reloads_itself_into_the_trace_page(
    browser, capsem_home, manifest, tmp_path, monkeypatch
):
    """Every ledger counts as big and nothing is waited for: the first view of a trace page
    is the 202 page (its rows and the rule book's verdicts are read in the background), which
    reloads itself into the trace page, whose graph then draws."""
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending, "WAIT_SECONDS", 0)
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    with live_server(capsem_home, tmp_path / "cache", index_refresh_seconds=0) as base:
        page = await browser.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
        first = await page.goto(base + trace_url(session["id"], trace), wait_until="load")
        assert first.status == 202
        assert "Being computed" in await page.inner_text("body")
        await page.wait_for_selector("#capsem-graph[data-ready='1']", timeout=60000)
        assert page.url == base + trace_url(session["id"], trace)
        assert "Being computed" not in await page.inner_text("body")
        assert problems == []
        await page.close()


async def test_the_trace_pages_scripts_ask_again_after_a_202(
    browser, capsem_home, manifest, tmp_path, monkeypatch
):
    """A big ledger's tree.json answers 202 while the trace's rows are read (here: its first
    fetch by the page's script, as when the file changed between the page and its fetch); the
    script asks again after the answer's `reload_seconds` and draws the tree, no error."""
    monkeypatch.setattr(ledger_db, "BIG_LEDGER_BYTES", 0)
    monkeypatch.setattr(pending, "WAIT_SECONDS", 0)
    held = trace_view.rows_held
    calls: list[int] = []

    def forgetting_once(datasette, opened, trace_id):
        calls.append(1)
        return None if len(calls) == 2 else held(datasette, opened, trace_id)

    session = clean_current(manifest)[1]
    trace = session["traces"][0]
    with live_server(capsem_home, tmp_path / "cache", index_refresh_seconds=0) as base:
        page = await browser.new_page()
        problems: list[str] = []
        statuses: list[int] = []
        page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
        page.on(
            "response",
            lambda response: (
                statuses.append(response.status) if response.url.endswith("/tree.json") else None
            ),
        )
        url = base + trace_url(session["id"], trace)
        for _ in range(600):  # the page itself once its rows and verdicts are read
            response = await page.goto(url, wait_until="domcontentloaded")
            if response.status == 200:
                break
            await page.wait_for_timeout(100)
        await page.goto("about:blank")
        statuses.clear()
        monkeypatch.setattr(trace_view, "rows_held", forgetting_once)
        await page.goto(url, wait_until="load")  # the page (call 1), then tree.json (call 2)
        await page.wait_for_selector("#capsem-graph[data-ready='1']", timeout=60000)
        await page.wait_for_selector(".capsem-span", timeout=10000)  # the tree drawn
        assert statuses[:2] == [202, 200], statuses
        assert problems == []
        await page.close()
