"""The home page's charts render in headless Chromium under the plugin's CSP, without errors."""

from __future__ import annotations

import pytest

from datasette_capsem.catalog import Catalog
from datasette_capsem.config import load_settings
from datasette_capsem.index import IndexService
from tests.browser import live_server, open_page

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def test_home_page_charts_render_without_console_errors(browser, capsem_home, tmp_path):
    # The charts are drawn from the cross-session index: build it first (as `datasette capsem
    # index` would), so the page does not wait for the server's first background build.
    settings = load_settings(
        {"capsem_home": str(capsem_home), "cache_dir": str(tmp_path / "cache")}
    )
    IndexService(settings, Catalog(settings)).refresh()
    with live_server(capsem_home, tmp_path / "cache") as base:
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
