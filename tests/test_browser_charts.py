"""The home page's charts render in headless Chromium under the plugin's CSP, without errors."""

from __future__ import annotations

import pytest

from tests.browser import live_server, open_page

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def test_home_page_charts_render_without_console_errors(
    browser, capsem_home, indexed_datasette, index_cache_dir
):
    # The charts are drawn from the cross-session index: served on conftest's built one (as
    # `datasette capsem index` would leave it), so the page does not wait for a first build.
    with live_server(capsem_home, index_cache_dir, index_refresh_seconds=0) as base:
        page, problems = await open_page(browser, base + "/")
        try:
            # A locator wait, not wait_for_function: the page's CSP forbids string evaluation.
            await page.locator(".capsem-chart svg").nth(2).wait_for(timeout=30000)
            assert await page.locator(".capsem-chart svg").count() == 3
            marks = await page.eval_on_selector_all(
                ".capsem-chart svg path, .capsem-chart svg rect", "els => els.length"
            )
            assert marks > 3
            filtered, more = await open_page(browser, base + "/-/capsem?kind=persistent")
            await filtered.locator(".capsem-chart svg").nth(2).wait_for(timeout=30000)
            assert await filtered.locator(".capsem-chart svg").count() == 3
            await filtered.close()
            assert problems + more == []
        finally:
            await page.close()
