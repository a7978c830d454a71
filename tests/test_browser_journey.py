"""The journey a Capsem user makes every day, in Chromium, on the demo home: from the session
list to the root cause of a tool call that never got a response, and to the request body of the
model call that emitted it, in at most 4 clicks and no Back. The README's tour shows these pages
(`CAPSEM_SCREENSHOTS=1` refreshes its screenshots).
"""

from __future__ import annotations

import pytest

from tests.browser import live_server, open_page, screenshot, settle
from tests.helpers import session_in

pytestmark = pytest.mark.asyncio(loop_scope="session")
NAME = "tour-unanswered-call"


async def test_from_the_list_to_the_body_in_four_clicks(
    browser, capsem_home, manifest, indexed_datasette, index_cache_dir
):
    session = session_in(manifest, name=NAME)
    # On conftest's built index (once per run), as the background refresh would leave it.
    with live_server(capsem_home, index_cache_dir, index_refresh_seconds=0) as base:
        page, problems = await open_page(browser, base + "/")
        await page.set_viewport_size({"width": 1280, "height": 900})
        # The list fits 1280 px and its verdict column is on screen.
        width = await page.evaluate("document.documentElement.scrollWidth")
        await screenshot(page, "tour-1-list.png")
        assert width <= 1280, width
        verdict = await page.locator("table.capsem-sessions th", has_text="Verdict").bounding_box()
        assert verdict and verdict["x"] + verdict["width"] <= 1280
        row = page.locator("table.capsem-sessions tr", has=page.get_by_role("link", name=NAME))
        assert "warning" in (await row.locator(".capsem-verdict-badge").inner_text())
        await screenshot(page, "tour-1-list.png")
        clicks = 0

        await row.get_by_role("link", name=NAME).click()  # 1: the named session
        clicks += 1
        await settle(page)
        assert page.url == f"{base}/-/capsem/sessions/{session['id']}"
        await screenshot(page, "tour-2-session.png")

        await page.get_by_role("link", name="Tool call that never got a response").click()  # 2
        clicks += 1
        await settle(page)
        assert "/tool_calls_without_response" in page.url  # the proof: a canned query
        assert await page.title() == f"Tool calls without a response · {session['id']}"
        results = await page.locator("table.rows-and-columns").bounding_box()
        form = await page.locator("form.sql").bounding_box()
        assert results["y"] < form["y"]  # results first, the (collapsed) SQL after them
        assert not await page.locator("#sql-query").count()
        await screenshot(page, "tour-3-rows.png")

        await page.locator("td.col-call_id a").first.click()  # 3: the call itself
        clicks += 1
        await settle(page)
        assert "/events/" in page.url
        relations = page.locator("ul.capsem-relations")
        assert "no response in this session" in await relations.inner_text()
        await screenshot(page, "tour-4-call.png", full_page=True)

        await relations.get_by_role("link").first.click()  # 4: the model call that emitted it
        clicks += 1
        await settle(page)
        assert "/events/" in page.url
        request = page.locator("section.capsem-body-section", has_text="request body").first
        assert await request.is_visible()
        assert len((await request.inner_text()).strip()) > 40  # the body itself is shown
        await request.scroll_into_view_if_needed()
        await screenshot(page, "tour-5-body.png")
        assert clicks <= 4
        assert not problems, problems
        await page.close()
