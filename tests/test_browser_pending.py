"""A big ledger's page answered 202 "being computed" (views/pending.py) in headless Chromium:
the page says so and reloads itself into the real page once the answer is there, with no
script error on the way."""

from __future__ import annotations

import pytest

from datasette_capsem.mount import ledger_db
from datasette_capsem.views import pending
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
