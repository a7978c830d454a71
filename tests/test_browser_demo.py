"""The demo's first impression in headless Chromium (`datasette capsem demo`'s home, generated
with the demo's own seed): the list opens on the named tour sessions, not on unreadable
sessions stamped with the generation time, and the home's charts are not mostly empty axes."""

from __future__ import annotations

import pytest

from datasette_capsem.catalog import Catalog
from datasette_capsem.cli.serve import DEMO_SEED
from datasette_capsem.config import load_settings
from datasette_capsem.generate import GenerateOptions, generate_home
from datasette_capsem.generate.plan import HEADLINE_SESSIONS
from datasette_capsem.index import IndexService
from tests.browser import live_server, open_page, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

TOUR = [name for name, _defects, _status in HEADLINE_SESSIONS]
# The share of a chart's plot width its bars cover: bars on a few days of a months-long time
# axis cover a few percent of it (measured 4 % on the demo before the charts drew only the days with
# data); drawn side by side they cover most of it.
COVERED = 0.3
COVERAGE = """figures => figures.map(figure => {
    const svg = figure.querySelector('.capsem-chart svg');
    const frame = svg && svg.querySelector('.role-frame path.background');
    if (!frame) return {width: 0, covered: 0, note: ''};
    const left = frame.getBoundingClientRect().left, width = frame.getBoundingClientRect().width;
    const spans = [...svg.querySelectorAll('.mark-rect path')].map(p => {
        const box = p.getBoundingClientRect();
        return [Math.max(box.left - left, 0), Math.min(box.right - left, width)];
    }).filter(([a, b]) => b > a).sort((x, y) => x[0] - y[0]);
    let covered = 0, end = 0;
    for (const [a, b] of spans) { if (b > end) { covered += b - Math.max(a, end); end = b; } }
    const note = figure.querySelector('.capsem-chart-note');
    return {width, covered: covered / width, note: note ? note.textContent : ''};
})"""


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("demo") / "home"
    generate_home(home, GenerateOptions(seed=DEMO_SEED, force=True))
    cache = home.parent / "cache"
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache)})
    IndexService(settings, Catalog(settings)).refresh()  # as the server's first build would
    return home, cache


@pytest.fixture(scope="module")
def base(demo_home):
    """One demo server for the module's tests (they only read its home)."""
    home, cache = demo_home
    with live_server(home, cache, demo=True, index_refresh_seconds=0) as url:
        yield url


async def test_the_demo_opens_on_the_tour_sessions(browser, base):
    page, problems = await open_page(browser, base + "/")
    await page.set_viewport_size({"width": 1400, "height": 1000})
    rows = page.locator("table.capsem-sessions tbody tr")
    names = [await rows.nth(i).locator("td").nth(1).inner_text() for i in range(len(TOUR))]
    assert [n.strip() for n in names] == TOUR
    verdicts = [await rows.nth(i).inner_text() for i in range(8)]
    assert not any("unreadable" in v for v in verdicts), verdicts
    await page.locator(".capsem-chart svg").nth(2).wait_for(timeout=30000)
    await screenshot(page, "demo-home.png", full_page=False)
    assert not problems, problems
    await page.close()


async def test_the_demo_charts_are_not_mostly_empty_axes(browser, base):
    page, problems = await open_page(browser, base + "/")
    await page.set_viewport_size({"width": 1400, "height": 1000})
    await page.locator(".capsem-chart svg").nth(2).wait_for(timeout=30000)
    charts = await page.eval_on_selector_all(".capsem-charts figure", COVERAGE)
    assert len(charts) == 3
    for chart in charts:
        assert chart["width"] > 0, charts
        assert chart["covered"] >= COVERED, charts
        if chart["note"]:  # an axis that skips days says so
            assert "days with data are drawn" in chart["note"]
    assert not problems, problems
    await page.close()
