"""Finding across sessions in headless Chromium, as a user clicks: the full-text search's hits
grouped by session and "show these sessions in the list", a list filter with no match that
leads to the full-text search, and the cost by model reached from the home page."""

from __future__ import annotations

import pytest

from tests.browser import live_server, open_page, screenshot, settle

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def base(capsem_home, indexed_datasette, index_cache_dir):
    """One server for the module's tests, on the cache holding the home's built cross-session
    index (conftest's, built once per run): it reads the index back, its own background
    refresh off."""
    with live_server(capsem_home, index_cache_dir, index_refresh_seconds=0) as url:
        yield url


async def test_search_groups_hits_by_session_and_lists_them(browser, base):
    page, problems = await open_page(browser, base + "/")
    await page.set_viewport_size({"width": 1300, "height": 1000})
    await page.get_by_label("Find in every session's text").fill("api* OR let")
    await page.locator("form.capsem-search button").click()
    await settle(page)
    heading = await page.locator("#capsem-hit-sessions").inner_text()
    count = int(heading.split()[1].replace(",", ""))
    assert count > 1, heading
    rows = page.locator(".capsem-text-sessions tbody tr")
    assert await rows.count() == count
    await screenshot(page, "search-sessions.png", full_page=False)
    await page.locator("a.capsem-hit-list").click()
    await settle(page)
    assert "Only the sessions with full-text hits" in await page.inner_text("body")
    listed = page.locator("table.capsem-sessions tbody tr")
    # The list hides vacuumed sessions by default: at most the grouped sessions.
    assert 0 < await listed.count() <= count
    assert not problems, problems
    await page.close()


async def test_an_empty_list_filter_leads_to_the_text_search(browser, base):
    page, problems = await open_page(browser, base + "/")
    await page.get_by_label("Filter the list by id or name").fill("let")
    await page.get_by_role("button", name="Apply").click()
    await settle(page)
    hint = page.locator(".capsem-list-hint")
    assert "filters the list by id or name only" in await hint.inner_text()
    await screenshot(page, "list-hint.png", full_page=False)
    await hint.locator("a").click()
    await settle(page)
    assert "/-/capsem/search" in page.url
    assert await page.locator(".capsem-text-hits tbody tr").count() > 0
    assert not problems, problems
    await page.close()


async def test_cost_by_model_from_the_home_page(browser, base):
    page, problems = await open_page(browser, base + "/")
    await page.set_viewport_size({"width": 1300, "height": 900})
    box = page.locator(".capsem-cost-box")
    said = await box.inner_text()
    assert "recorded cost" in said and "By model:" in said
    await screenshot(page, "home-cost-box.png", full_page=False)
    await box.get_by_role("link", name="Cost by model, with totals").click()
    await settle(page)
    assert await page.locator("h1").inner_text() == "Cost by model across sessions"
    models = page.locator(".capsem-costs tbody tr")
    assert await models.count() >= 2
    total = await page.locator(".capsem-costs tfoot tr").inner_text()
    assert total.startswith("Total, every model")
    # The box's figure is the total row's, to the cent.
    assert said.split()[0] == "$" + f"{float(total.split('$')[1].split()[0].replace(',', '')):,.2f}"
    await screenshot(page, "costs.png", full_page=True)
    assert not problems, problems
    await page.close()
