"""The trace explorer in headless Chromium: the span tree (collapsible, keyboard-navigable),
the detail panel fed on demand with the selection in the URL, graph clicks that select, search
that highlights tree and picture, lane toggles, findings that lead to their rows, hostile
content that stays text, and a 500-call trace."""

from __future__ import annotations

import pytest

from tests.browser import live_server, open_page, screenshot_dir
from tests.test_browser_trace import LONG_CALLS, long_trace  # noqa: F401 (fixture)
from tests.trace_support import clean_current, defect_sessions, hostile_session, trace_url

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

READY = "#capsem-explorer[data-ready='1']"
GRAPH_READY = "#capsem-graph[data-ready='1']"


async def ready(page) -> None:
    await page.wait_for_selector(READY, timeout=30000)
    await page.wait_for_selector(GRAPH_READY, timeout=30000)


async def loaded(page, node_id: str) -> None:
    await page.wait_for_selector(f".capsem-detail[data-loaded='{node_id}']", timeout=30000)


async def test_tree_panel_and_keyboard(browser, capsem_home, manifest, tmp_path):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    with live_server(capsem_home, tmp_path / "cache", index_refresh_seconds=0) as base:
        page, problems = await open_page(browser, base + trace_url(session["id"], trace))
        await page.set_viewport_size({"width": 1600, "height": 1200})
        await ready(page)
        rows = page.locator(".capsem-tree [role=treeitem]")
        calls = page.locator(".capsem-tree [data-span^='model_calls:']")
        assert await calls.count() >= 1
        before = await rows.count()

        # Keyboard: focus the first row, walk down to a model call, open it, select it.
        await rows.first.focus()
        call_id = await calls.first.get_attribute("data-span")
        for _ in range(before):
            focused = await page.evaluate("document.activeElement.getAttribute('data-span')")
            if focused == call_id:
                break
            await page.keyboard.press("ArrowDown")
        assert await page.evaluate("document.activeElement.getAttribute('data-span')") == call_id
        assert await calls.first.get_attribute("aria-expanded") == "false"
        await page.keyboard.press("ArrowRight")
        assert await page.locator(f"[data-span='{call_id}']").get_attribute("aria-expanded") == (
            "true"
        )
        assert await rows.count() > before
        await page.keyboard.press("Enter")
        await loaded(page, call_id)
        assert page.url.endswith("#node=" + call_id.replace(":", "%3A"))
        panel = await page.inner_text(".capsem-detail")
        for text in ("Input tokens", "Cache read", "Thinking", "Cost (USD)", "provider", "Bodies"):
            assert text in panel, text
        assert "request body of the model call" in panel
        assert "response body of the model call" in panel
        await page.locator(".capsem-explorer").screenshot(
            path=str(screenshot_dir() / "trace-explorer.png")
        )
        await page.keyboard.press("ArrowLeft")
        assert await page.locator(f"[data-span='{call_id}']").get_attribute("aria-expanded") == (
            "false"
        )

        # The URL is the selection: a fresh page opens the same node.
        shared = page.url
        await page.close()
        page, more = await open_page(browser, shared)
        await ready(page)
        await loaded(page, call_id)
        assert await page.locator(f".capsem-tree [data-span='{call_id}'].selected").count() == 1
        assert await page.locator(f"#capsem-graph g[data-node-id='{call_id}'].selected").count()
        await page.close()
        assert problems + more == []


async def test_graph_click_search_and_lanes(browser, capsem_home, manifest, tmp_path):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    with live_server(capsem_home, tmp_path / "cache", index_refresh_seconds=0) as base:
        page, problems = await open_page(browser, base + trace_url(session["id"], trace))
        await page.set_viewport_size({"width": 1600, "height": 1200})
        await ready(page)
        url = page.url
        node = page.locator("#capsem-graph g[data-type='tool_call']").first
        node_id = await node.get_attribute("data-node-id")
        await node.click()
        await loaded(page, node_id)
        assert page.url.startswith(url)  # no navigation: the panel shows it
        assert "tool_name" in await page.inner_text(".capsem-detail")
        assert await page.locator(f".capsem-tree [data-span='{node_id}'].selected").count() == 1

        tool = await page.locator(f".capsem-tree [data-span='{node_id}'] a").inner_text()
        await page.fill(".capsem-trace-search", tool)
        await page.wait_for_selector(".capsem-tree .capsem-span.match")
        matched = await page.locator(".capsem-tree .capsem-span.match").count()
        assert matched >= 1
        assert await page.locator("#capsem-graph g.match").count() >= 1
        assert "match" in await page.inner_text(".capsem-match-note")
        await page.fill(".capsem-trace-search", "")
        await page.wait_for_timeout(300)
        assert await page.locator(".capsem-tree .capsem-span.match").count() == 0

        await page.click(".capsem-tree-expand")
        assert await page.locator(".capsem-tree .capsem-span-security_event").count() >= 1
        await page.uncheck("input[data-lane='security']")
        assert await page.locator(".capsem-tree .capsem-span-security_event").count() == 0
        await page.check("input[data-lane='security']")
        assert await page.locator(".capsem-tree .capsem-span-security_event").count() >= 1
        await page.close()
        assert problems == []


async def test_findings_lead_to_their_rows(browser, capsem_home, manifest, tmp_path):
    session, defect = defect_sessions(manifest, "orphan_tool_response")[0]
    node_id = f"{defect['table']}:{defect['row_id']}"
    with live_server(capsem_home, tmp_path / "cache", index_refresh_seconds=0) as base:
        page, problems = await open_page(browser, base + f"/-/capsem/sessions/{session['id']}")
        for trace in session["traces"]:
            await page.goto(base + trace_url(session["id"], trace), wait_until="networkidle")
            await ready(page)
            if await page.locator(f".capsem-findings a[data-node='{node_id}']").count():
                break
        await page.set_viewport_size({"width": 1600, "height": 1200})
        await page.click(f".capsem-findings a[data-node='{node_id}']")
        await loaded(page, node_id)
        panel = await page.inner_text(".capsem-detail")
        assert "orphan_tool_response" in panel and "Findings on this row" in panel
        assert await page.locator(f"#capsem-graph g[data-node-id='{node_id}'].selected").count()
        assert await page.locator(".capsem-tree .capsem-span.missing").count() >= 1
        await page.close()
        assert problems == []


async def test_hostile_content_stays_text_in_the_explorer(
    browser, capsem_home, manifest, tmp_path
):
    session = hostile_session(manifest)
    with live_server(capsem_home, tmp_path / "cache", index_refresh_seconds=0) as base:
        for trace in session["traces"]:
            page, problems = await open_page(browser, base + trace_url(session["id"], trace))
            await ready(page)
            await page.click(".capsem-tree-expand")
            for lane in ("item",):
                await page.check(f"input[data-lane='{lane}']")
            spans = await page.locator(".capsem-tree [data-span]").evaluate_all(
                "rows => rows.map(r => r.getAttribute('data-span'))"
            )
            for span in [s for s in spans if ":" in s and not s.startswith("missing")][:40]:
                await page.evaluate(
                    "id => document.dispatchEvent(new CustomEvent('capsem:select', "
                    "{detail: {id}}))",
                    span,
                )
                await loaded(page, span)
                for button in await page.locator(".capsem-load-body").all():
                    await button.click()
            await page.fill(".capsem-trace-search", "<script>")
            await page.wait_for_timeout(300)
            assert await page.evaluate("window.__pwned") is None
            await page.close()
            assert problems == []


async def test_a_500_call_trace_explorer(browser, long_trace, tmp_path):  # noqa: F811
    home, session_id, trace = long_trace
    with live_server(home, tmp_path / "cache", index_refresh_seconds=0) as base:
        page, problems = await open_page(browser, base + trace_url(session_id, trace))
        await page.set_viewport_size({"width": 1600, "height": 1200})
        await ready(page)
        calls = page.locator(".capsem-tree [data-span^='model_calls:']")
        assert await calls.count() == LONG_CALLS
        middle = await calls.nth(LONG_CALLS // 2).get_attribute("data-span")
        await calls.nth(LONG_CALLS // 2).locator("a").click()
        await loaded(page, middle)
        # The folded picture unfolds the block holding the selected call.
        assert await page.locator(f"#capsem-graph g[data-node-id='{middle}'].selected").count()
        await page.close()
        assert problems == []
