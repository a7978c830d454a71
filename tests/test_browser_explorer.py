"""The trace explorer in headless Chromium: the span tree (collapsible, keyboard-navigable),
the detail panel fed on demand with the selection in the URL, graph clicks that select, search
that highlights tree, timeline and picture, lane toggles, the timeline's zoom, pan and critical
path, the picture's zoom, pan, minimap and broken links, image bodies shown (and SVG kept text),
the conversation's repeated history unfolded, findings that lead to their rows, hostile content
that stays text, and a 500-call trace. One server per home for the whole module."""

from __future__ import annotations

import random
import struct
import uuid
import zlib
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from datasette_capsem.generate.content import SessionShape, blake3_ref, build_session
from datasette_capsem.generate.rows import write_ledger
from tests.browser import goto, live_server, open_page, screenshot, tab_through
from tests.test_browser_trace import LONG_CALLS, long_trace  # noqa: F401 (fixture)
from tests.trace_support import clean_current, defect_sessions, hostile_session, trace_url

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

READY = "#capsem-explorer[data-ready='1']"
GRAPH_READY = "#capsem-graph[data-ready='1']"
SVG_BODY = (
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned=1">'
    b"<script>window.__pwned=2</script><text>hostile svg</text></svg>"
)


@pytest.fixture(scope="module")
def base(capsem_home, tmp_path_factory):
    """One plugin server over the generated home for every test of this module."""
    cache = tmp_path_factory.mktemp("explorer-cache")
    with live_server(capsem_home, cache, index_refresh_seconds=0) as base:
        yield base


@pytest.fixture(scope="module")
def long_server(long_trace, tmp_path_factory):  # noqa: F811
    home, session_id, trace = long_trace
    cache = tmp_path_factory.mktemp("explorer-long-cache")
    with live_server(home, cache, index_refresh_seconds=0) as base:
        yield base, session_id, trace


def png(width: int = 160, height: int = 96) -> bytes:
    """A real PNG (an orange-to-blue gradient), built by hand: signature, IHDR, IDAT, IEND."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    def pixel(x: int, y: int) -> bytes:
        return bytes((245 - x, 120 + y, 11 + x, 255))

    rows = b"".join(b"\x00" + b"".join(pixel(x, y) for x in range(width)) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture(scope="module")
def image_trace(tmp_path_factory) -> tuple[Path, str, str, list[str]]:
    """A home whose first model call's response body is a PNG (stored as text/html: the page
    must go by the bytes) and whose second's is an SVG with script in it:
    (home, session, trace, the two model call nodes)."""
    rng = random.Random(7)
    start = datetime(2026, 8, 2, 9, 0, tzinfo=timezone.utc)
    builder = build_session(rng, "head", start, SessionShape(traces=1, calls=2))
    calls = builder.ledger.rows["model_calls"][:2]
    for call, (body, media) in zip(
        calls, ((png(), "text/html"), (SVG_BODY, "image/svg+xml")), strict=True
    ):
        blob = next(
            b
            for b in builder.ledger.rows["event_body_blobs"]
            if b["event_id"] == call["event_id"]
            and b["direction"] == "response"
            and b["source_table"] == "model_calls"
        )
        blob.update(
            body=body,
            content_type=media,
            stored_bytes=len(body),
            original_bytes=len(body),
            body_hash=blake3_ref(body),
        )
    session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    home = tmp_path_factory.mktemp("image-trace") / "home"
    write_ledger(home / "run" / "sessions" / session_id / "session.db", "head", builder.ledger)
    return home, session_id, calls[0]["trace_id"], [f"model_calls:{c['id']}" for c in calls]


async def attr(page, selector: str, name: str) -> str | None:
    return await page.locator(selector).first.get_attribute(name)


async def open_trace(browser, url: str):
    """A trace page in a 1600×1200 tab, once its tree and picture are drawn: (page, problems)."""
    page, problems = await open_page(browser, url)
    await page.set_viewport_size({"width": 1600, "height": 1200})
    await ready(page)
    return page, problems


async def ready(page) -> None:
    await page.wait_for_selector(READY, timeout=30000)
    await page.wait_for_selector(GRAPH_READY, timeout=30000)


async def loaded(page, node_id: str) -> None:
    await page.wait_for_selector(f".capsem-detail[data-loaded='{node_id}']", timeout=30000)


async def test_tree_panel_and_keyboard(browser, base, manifest):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    page, problems = await open_trace(browser, base + trace_url(session["id"], trace))
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
    assert await page.locator(f"[data-span='{call_id}']").get_attribute("aria-expanded") == ("true")
    assert await rows.count() > before
    await page.keyboard.press("Enter")
    await loaded(page, call_id)
    assert page.url.endswith("#node=" + call_id.replace(":", "%3A"))
    # (a model call's columns are in a fold under its chat: its text, folded or not)
    panel = await page.locator(".capsem-detail").text_content()
    for text in ("Input tokens", "Cache read", "Thinking", "Cost (USD)", "provider", "Bodies"):
        assert text in panel, text
    assert "request body of the model call" in panel
    assert "response body of the model call" in panel
    await screenshot(page.locator(".capsem-explorer"), "trace-explorer.png")
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


async def test_graph_click_search_and_lanes(browser, base, manifest):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    page, problems = await open_trace(browser, base + trace_url(session["id"], trace))
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


async def test_findings_lead_to_their_rows(browser, base, manifest):
    session, defect = defect_sessions(manifest, "orphan_tool_response")[0]
    node_id = f"{defect['table']}:{defect['row_id']}"
    page, problems = await open_page(browser, base + f"/-/capsem/sessions/{session['id']}")
    for trace in session["traces"]:
        await goto(page, base + trace_url(session["id"], trace))
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


@pytest.mark.heavy  # tens of seconds: its module is scheduled first (conftest.py)
async def test_hostile_content_stays_text_in_the_explorer(browser, base, manifest):
    session = hostile_session(manifest)
    urls = [base + trace_url(session["id"], trace) for trace in session["traces"]]
    async for page, problems in tab_through(browser, urls):
        await ready(page)
        await page.click(".capsem-tree-expand")
        for lane in ("item",):
            await page.check(f"input[data-lane='{lane}']")
        spans = await page.locator(".capsem-tree [data-span]").evaluate_all(
            "rows => rows.map(r => r.getAttribute('data-span'))"
        )
        for span in [s for s in spans if ":" in s and not s.startswith("missing")][:40]:
            await page.evaluate(
                "id => document.dispatchEvent(new CustomEvent('capsem:select', {detail: {id}}))",
                span,
            )
            await loaded(page, span)
            for button in await page.locator(".capsem-load-body").all():
                await button.click()
        await page.fill(".capsem-trace-search", "<script>")
        await page.wait_for_timeout(300)
        assert await page.evaluate("window.__pwned") is None
        # The conversation, with every repeated history unfolded, is text too.
        await page.evaluate("document.getElementById('capsem-conversation-section').open = true")
        await page.wait_for_selector("#capsem-conversation[data-ready='1']")
        buttons = await page.locator(".capsem-conv-repeated").all()
        for button in buttons:
            await button.click()
        ready_count = page.locator(".capsem-conv-history[data-state='ready']")
        await page.wait_for_function(
            "n => document.querySelectorAll(\".capsem-conv-history[data-state='ready']\").length == n",
            arg=len(buttons),
        )
        assert await ready_count.count() == len(buttons)
        assert await page.evaluate("window.__pwned") is None
        assert problems == []


async def test_timeline_zooms_pans_and_marks_the_critical_path(browser, base, manifest):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    page, problems = await open_trace(browser, base + trace_url(session["id"], trace))
    root = "#capsem-explorer"
    tree = await page.evaluate(
        "url => fetch(url).then(r => r.json())", trace_url(session["id"], trace, "/tree.json")
    )
    await page.click(".capsem-tree-expand")
    critical = await page.locator(".capsem-tree .capsem-span.critical").evaluate_all(
        "rows => rows.map(r => r.getAttribute('data-span'))"
    )
    assert critical and set(critical) == set(tree["critical_path"])
    bar = page.locator(".capsem-tree .capsem-span.critical .capsem-bar").first
    assert await bar.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(194, 65, 12)"
    await page.uncheck(".capsem-critical-toggle input")
    assert await bar.evaluate("b => getComputedStyle(b).backgroundColor") != "rgb(194, 65, 12)"
    await page.check(".capsem-critical-toggle input")

    # Buttons, wheel, drag and keys move the time window the bars show.
    await page.click(".capsem-zoom-in")
    assert await attr(page, root, "data-zoom") == "1.60"
    box = await page.locator(".capsem-tree .capsem-span .capsem-col-bar").first.bounding_box()
    await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    await page.mouse.wheel(0, -120)
    assert float(await attr(page, root, "data-zoom")) > 1.6
    before = await attr(page, root, "data-window")
    await page.mouse.down()
    await page.mouse.move(box["x"] + box["width"] / 2 - 80, box["y"] + box["height"] / 2, steps=4)
    await page.mouse.up()
    after = await attr(page, root, "data-window")
    assert int(after.split("-")[0]) > int(before.split("-")[0])  # dragged left: later times
    assert await page.locator(".capsem-detail[data-loaded]").count() == 0  # a drag selects nothing
    call = page.locator(".capsem-tree [data-span^='model_calls:']").nth(1)
    call_id = await call.get_attribute("data-span")
    await call.focus()
    await page.keyboard.press("0")
    assert await attr(page, root, "data-zoom") == "1.00"
    await page.keyboard.press("+")
    await page.keyboard.press("Shift+ArrowRight")
    assert await attr(page, root, "data-window") != f"0-{round(tree['totals']['duration_ms'])}"
    await page.keyboard.press("Enter")
    await loaded(page, call_id)
    await page.keyboard.press("z")
    start, end = (int(x) for x in (await attr(page, root, "data-window")).split("-"))
    span = next(s for s in tree_spans(tree) if s["id"] == call_id)
    assert start <= span["t"] and span["t"] + span["duration_ms"] <= end + 1

    # Search highlights the tree, the timeline's bars and the picture.
    tool = await page.locator(".capsem-tree [data-span^='tool_calls:'] a").first.inner_text()
    await page.fill(".capsem-trace-search", tool)
    await page.wait_for_selector(".capsem-tree .capsem-span.match")
    await page.click(".capsem-zoom-fit")
    assert await page.locator(".capsem-tree .capsem-span.match .capsem-bar").count() >= 1
    assert await page.locator("#capsem-graph g.node.match").count() >= 1
    await page.close()
    assert problems == []


def tree_spans(tree: dict) -> list[dict]:
    found, stack = [], [tree["root"]]
    while stack:
        span = stack.pop()
        found.append(span)
        stack.extend(span.get("children", []))
    return found


async def test_picture_zooms_pans_and_leads_to_broken_links(browser, base, manifest):
    session, defect = defect_sessions(manifest, "orphan_tool_response")[0]
    node_id = f"{defect['table']}:{defect['row_id']}"
    page, problems = await open_page(browser, base + f"/-/capsem/sessions/{session['id']}")
    await page.set_viewport_size({"width": 1400, "height": 1000})
    for trace in session["traces"]:
        await goto(page, base + trace_url(session["id"], trace))
        await ready(page)
        if await page.locator(f"#capsem-graph g[data-node-id='{node_id}']").count():
            break
    graph, svg = "#capsem-graph", "#capsem-graph svg.capsem-graph-svg"
    width = float(await attr(page, svg, "width"))
    await page.click(".capsem-gzoom-in")
    assert await attr(page, graph, "data-scale") == "1.250"
    assert float(await attr(page, svg, "width")) == pytest.approx(width * 1.25, abs=1)
    canvas = page.locator(".capsem-graph-canvas")
    await page.locator(graph).evaluate("g => g.scrollIntoView({block: 'start'})")
    box = await canvas.bounding_box()
    await page.mouse.move(box["x"] + 300, box["y"] + 200)
    await page.keyboard.down("Control")
    await page.mouse.wheel(0, -100)
    await page.keyboard.up("Control")
    assert float(await attr(page, graph, "data-scale")) > 1.25
    # A drag on the picture pans it; the minimap's frame follows.
    await canvas.evaluate("c => { c.scrollLeft = 0; c.scrollTop = 0; }")
    frame = page.locator(".capsem-minimap-view")
    left = await frame.evaluate("f => f.style.left")
    await page.mouse.move(box["x"] + 400, box["y"] + 150)
    await page.mouse.down()
    await page.mouse.move(box["x"] + 150, box["y"] + 150, steps=5)
    await page.mouse.up()
    assert await canvas.evaluate("c => c.scrollLeft") > 0
    assert await frame.evaluate("f => f.style.left") != left
    # Clicking the minimap moves the view there.
    minimap = await page.locator(".capsem-minimap").bounding_box()
    await page.mouse.click(minimap["x"] + 2, minimap["y"] + 2)
    assert await canvas.evaluate("c => c.scrollLeft") == 0
    await page.mouse.click(minimap["x"] + minimap["width"] - 2, minimap["y"] + 2)
    assert await canvas.evaluate("c => c.scrollLeft") > 0
    await canvas.focus()
    await page.keyboard.press("0")
    assert float(await attr(page, graph, "data-scale")) <= 1
    await page.keyboard.press("1")
    assert await attr(page, graph, "data-scale") == "1.000"

    # The broken links: stepped through from the picture, each selected with its finding (and
    # brought into view, zoomed in).
    await page.click(".capsem-gzoom-in")
    await page.click(".capsem-gzoom-in")
    await page.click(".capsem-next-broken")
    await page.wait_for_selector(".capsem-detail[data-loaded]")
    selected = await attr(page, ".capsem-detail", "data-loaded")
    assert "Findings on this row" in await page.inner_text(".capsem-detail")
    assert await page.locator(f"{graph} g[data-node-id='{selected}'].selected").count() == 1
    assert await page.locator(f"{graph} path.edge.broken.focus").count() >= 1
    await screenshot(page.locator(graph), "trace-graph-zoomed.png")
    await page.close()
    assert problems == []


async def test_image_bodies_show_and_svg_stays_text(browser, image_trace, tmp_path):
    home, session_id, trace, (png_call, svg_call) = image_trace
    with live_server(home, tmp_path / "cache", index_refresh_seconds=0) as base:
        url = base + trace_url(session_id, trace) + "#node=" + png_call.replace(":", "%3A")
        page, problems = await open_trace(browser, url)
        await loaded(page, png_call)
        image = page.locator(".capsem-detail .capsem-body-image img")
        assert await image.count() == 1
        await page.wait_for_function(
            "() => document.querySelector('.capsem-body-image img').naturalWidth > 0"
        )
        assert await image.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [160, 96]
        source = await image.get_attribute("src")
        response = httpx.get(base + source)
        assert response.headers["content-type"] == "image/png"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.content == png()
        await screenshot(page.locator(".capsem-detail-body:has(img)"), "trace-image-body.png")

        # The SVG is text: no <img>, no <svg> element made from it, no script run.
        await page.evaluate(
            "id => document.dispatchEvent(new CustomEvent('capsem:select', {detail: {id}}))",
            svg_call,
        )
        await loaded(page, svg_call)
        panel = await page.inner_text(".capsem-detail")
        assert "hostile svg" in panel and "<script>" in panel
        assert await page.locator(".capsem-detail img, .capsem-detail svg").count() == 0
        assert await page.evaluate("window.__pwned") is None
        downloads = await page.locator(".capsem-detail a.capsem-download").evaluate_all(
            "links => links.map(a => a.getAttribute('href'))"
        )
        types = {httpx.get(base + href).headers["content-type"] for href in downloads}
        assert types == {"application/octet-stream"}
        await page.close()
        assert problems == []


async def test_conversation_unfolds_repeated_history(browser, base, manifest):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    page, problems = await open_page(
        browser, base + trace_url(session["id"], trace) + "#conversation"
    )
    await page.set_viewport_size({"width": 1400, "height": 1200})
    await page.wait_for_selector("#capsem-conversation[data-ready='1']")
    await ready(page)
    history = page.locator(".capsem-conv-history").first
    button = history.locator("button.capsem-conv-repeated")
    repeated = int((await button.inner_text()).split()[1])
    assert await history.locator(".capsem-msg").count() == 0
    await button.click()
    await page.wait_for_selector(".capsem-conv-history[data-state='ready']")
    assert await history.locator(".capsem-msg").count() == repeated
    assert await history.locator(".capsem-msg-new").count() == 0
    assert await button.get_attribute("aria-expanded") == "true"
    await screenshot(page.locator("#capsem-conversation-section"), "trace-conversation.png")
    await page.close()
    assert problems == []


async def test_a_500_call_trace_explorer(browser, long_server):
    base, session_id, trace = long_server
    page, problems = await open_trace(browser, base + trace_url(session_id, trace))
    calls = page.locator(".capsem-tree [data-span^='model_calls:']")
    assert await calls.count() == LONG_CALLS
    assert await page.locator(".capsem-tree .capsem-span.critical").count() >= 2
    # A search finds calls folded in the picture's blocks: the blocks that hold them light up.
    await page.fill(".capsem-trace-search", "tool_use")
    await page.wait_for_selector(".capsem-tree .capsem-span.match")
    assert await page.locator("#capsem-graph g[data-type='cluster'].match").count() >= 1
    await page.click(".capsem-zoom-in")
    assert await attr(page, "#capsem-explorer", "data-zoom") == "1.60"
    await page.fill(".capsem-trace-search", "")
    await page.wait_for_selector(".capsem-tree .capsem-span.match", state="detached")
    # The first calls, zoomed in: the critical path steps from call to call.
    await calls.nth(3).focus()
    await page.keyboard.press("z")
    for _ in range(4):
        await page.keyboard.press("-")
    assert float(await attr(page, "#capsem-explorer", "data-zoom")) > 5
    await screenshot(page.locator(".capsem-explorer"), "trace-timeline.png")
    middle = await calls.nth(LONG_CALLS // 2).get_attribute("data-span")
    await calls.nth(LONG_CALLS // 2).locator("a").click()
    await loaded(page, middle)
    # The folded picture unfolds the block holding the selected call.
    assert await page.locator(f"#capsem-graph g[data-node-id='{middle}'].selected").count()
    await page.click(".capsem-gzoom-fit")
    assert float(await attr(page, "#capsem-graph", "data-scale")) < 1
    await page.close()
    assert problems == []
