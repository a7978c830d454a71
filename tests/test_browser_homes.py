"""The list over several labelled homes and the chooser of a colliding id, in headless Chromium:
the Home column and facet link and filter, the chooser links each home's session, no script
error."""

from __future__ import annotations

import pytest

from tests.browser import goto, live_server, open_page, screenshot, settle

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


async def test_the_list_by_home_and_the_chooser(browser, homes_dir, tmp_path):
    with live_server(None, tmp_path / "cache", homes_dir=str(homes_dir)) as base:
        page, problems = await open_page(browser, base + "/-/capsem?all=1")
        await page.set_viewport_size({"width": 1500, "height": 1000})
        headings = await page.locator("table.capsem-sessions th").all_inner_texts()
        assert headings[:2] == ["Home", "Session"]
        homes = set(await page.locator("td.capsem-home a").all_inner_texts())
        assert homes == {"alpha", "beta"}
        await screenshot(page, "homes-list.png")
        await page.locator(".capsem-facet a", has_text="beta").click()
        await settle(page)
        assert set(await page.locator("td.capsem-home a").all_inner_texts()) == {"beta"}
        assert "✕" in await page.inner_text(".capsem-facet")
        await goto(page, base + "/-/capsem/sessions/co-work-2")
        links = page.locator(".capsem-suggestions a", has_text="--co-work-2")
        assert set(await links.all_inner_texts()) == {"alpha--co-work-2", "beta--co-work-2"}
        homes = page.locator(".capsem-suggestions a.capsem-home")
        assert set(await homes.all_inner_texts()) == {"alpha", "beta"}
        await screenshot(page, "homes-chooser.png", full_page=True)
        await links.nth(1).click()
        await settle(page)
        assert page.url.endswith("/-/capsem/sessions/beta--co-work-2")
        await goto(page, base + "/-/capsem/resolve?name=co-work-2")
        cells = await page.locator("td.capsem-home").all_inner_texts()
        assert set(cells) == {"alpha", "beta"}
        await screenshot(page, "homes-resolve.png", full_page=True)
        assert not problems, problems
        await page.close()
