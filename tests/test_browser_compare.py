"""Compare two turns in headless Chromium: the first divergence stated and marked in the aligned
tool calls, every id a working link, no script error."""

from __future__ import annotations

import pytest

from tests.browser import goto, live_server, open_page, screenshot, settle
from tests.test_compare import compare_home, url  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def base(compare_home, tmp_path_factory):  # noqa: F811
    """One server over the compare home for the module's tests (they only read it)."""
    cache = tmp_path_factory.mktemp("compare-browser-cache")
    with live_server(compare_home[0], cache, index_refresh_seconds=0) as url:
        yield url


async def test_compare_page(browser, compare_home, base):  # noqa: F811
    home, a, b, _ = compare_home
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
    await screenshot(page, "compare.png", full_page=True)
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


async def test_compare_starts_from_the_session_page(browser, compare_home, base):  # noqa: F811
    """Tick two turns in a session's turn list and press Compare; or "with…" beside a turn,
    then pick another turn in the chooser: both land on the comparison."""
    home, a, _b, _ = compare_home
    session = a[0]
    assert len(session["traces"]) >= 2, "the compared session needs two turns"
    page, problems = await open_page(browser, f"{base}/-/capsem/sessions/{session['id']}")
    boxes = page.locator(".capsem-traces input[type=checkbox][name=turn]")
    assert await boxes.count() >= 2
    await boxes.nth(0).check()
    await boxes.nth(1).check()
    await page.set_viewport_size({"width": 1300, "height": 900})
    await page.locator("#traces").scroll_into_view_if_needed()
    await screenshot(page, "session-turns-compare.png")
    await page.get_by_role("button", name="Compare the two ticked turns").click()
    await settle(page)
    assert "/-/capsem/compare" in page.url
    assert await page.locator("h1").inner_text() == "Compare two turns"
    assert await page.locator(".capsem-compare-totals").count() == 1
    # "with…" beside a turn: the chooser lists the session's other turns.
    await goto(page, f"{base}/-/capsem/sessions/{session['id']}")
    await page.locator(".capsem-traces a.capsem-compare-with").first.click()
    await settle(page)
    await page.set_viewport_size({"width": 1200, "height": 900})
    await screenshot(page, "compare-chooser.png", full_page=True)
    choices = page.locator("#capsem-compare-this a.capsem-compare-with")
    assert await choices.count() >= 1
    await choices.first.click()
    await settle(page)
    assert await page.locator(".capsem-compare-totals").count() == 1
    # The comparison shows arguments as JSON (the hash as their tooltip), no "…0.0".
    args = page.locator("pre.capsem-cmp-args")
    if await args.count():
        assert (await args.first.get_attribute("title") or "").startswith("sha256:")
    await screenshot(page, "compare-picked.png", full_page=True)
    assert not problems, problems
    await page.close()


async def test_compare_alone_is_a_form(browser, compare_home, base):  # noqa: F811
    home, _a, b, _ = compare_home
    page, problems = await open_page(browser, f"{base}/-/capsem/compare")
    await page.fill("input[name=a]", b[1])  # two bare trace ids
    await page.fill(".capsem-compare-form >> nth=0 >> input[name=b]", b[1])
    await page.get_by_role("button", name="Compare").click()
    await settle(page)
    assert "same tool calls" in await page.inner_text("#capsem-diverged")
    assert not problems, problems
    await page.close()
