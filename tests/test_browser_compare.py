"""Compare two turns in headless Chromium: the first divergence stated and marked in the aligned
tool calls, every id a working link, no script error."""

from __future__ import annotations

import pytest

from tests.browser import live_server, open_page, screenshot_dir, settle
from tests.test_compare import compare_home, url  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def test_compare_page(browser, compare_home, tmp_path):  # noqa: F811
    home, a, b, _ = compare_home
    with live_server(home, tmp_path / "cache", index_refresh_seconds=0) as base:
        page, problems = await open_page(
            browser, base + url(f"{a[0]['id']}:{a[1]}", f"{b[0]['id']}:{b[1]}", "")
        )
        await page.set_viewport_size({"width": 1500, "height": 1000})
        assert "First divergence: tool call 2" in await page.inner_text("#capsem-diverged")
        rows = page.locator(".capsem-compare-tools tbody tr")
        assert await rows.nth(0).get_attribute("data-status") == "same"
        assert await rows.nth(1).get_attribute("data-status") == "changed"
        assert "capsem-cmp-first" in (await rows.nth(1).get_attribute("class"))
        assert await page.locator(".capsem-compare-steps tbody tr").count() >= 2
        await page.screenshot(path=str(screenshot_dir() / "compare.png"), full_page=True)
        # Every id is a link, and the links lead somewhere.
        for selector in (
            ".capsem-compare-tools tbody tr >> nth=1 >> a >> nth=1",
            ".capsem-compare-steps tbody tr >> nth=0 >> a >> nth=0",
        ):
            href = await page.locator(selector).get_attribute("href")
            response = await page.request.get(base + href)
            assert response.status == 200, href
        await page.locator("a", has_text="Swap a and b").click()
        await settle(page)
        assert "tool call 2" in await page.inner_text("#capsem-diverged")
        assert not problems, problems
        await page.close()
