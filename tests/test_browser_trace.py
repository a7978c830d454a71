"""The trace page in headless Chromium: the graph draws, its nodes link to their rows, broken
links show, no label overlaps a node or another label, a 500-call trace collapses and expands,
hostile text stays text, and screenshots of a small and a 500-call graph are saved (to
docs/screenshots/ with CAPSEM_SCREENSHOTS=1)."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from datasette_capsem.generate.content import SessionShape, build_session
from datasette_capsem.generate.rows import write_ledger
from tests.browser import goto, live_server, open_page, screenshot, tab_through
from tests.trace_support import clean_current, defect_sessions, hostile_session, trace_url

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

READY = "#capsem-graph[data-ready='1']"
LONG_CALLS = 500


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory) -> tuple[Path, str, str]:
    """A home with one session whose single trace has 500 model calls: (home, session, trace).

    Built with the generator's session builder (the full `generate_home` would write two
    dozen such sessions, about 1.4 GB, for a test that needs one).
    """

    rng = random.Random(500)
    start = datetime(2026, 8, 1, 9, 0, tzinfo=timezone.utc)
    builder = build_session(rng, "head", start, SessionShape(traces=1, calls=LONG_CALLS))
    session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    home = tmp_path_factory.mktemp("long-trace") / "home"
    write_ledger(home / "run" / "sessions" / session_id / "session.db", "head", builder.ledger)
    trace = builder.ledger.rows["model_calls"][0]["trace_id"]
    return home, session_id, trace


@pytest.fixture(scope="module")
def base(capsem_home, tmp_path_factory):
    """One plugin server over the generated home for the tests of this module."""
    cache = tmp_path_factory.mktemp("trace-browser-cache")
    with live_server(capsem_home, cache, index_refresh_seconds=0) as url:
        yield url


async def graph_ready(page) -> None:
    await page.wait_for_selector(READY, timeout=30000)


async def graph_screenshot(page, name: str) -> None:
    await screenshot(page.locator("#capsem-graph"), name)


async def test_clicking_graph_nodes_opens_their_rows(browser, base, manifest):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    page, problems = await open_page(browser, base + trace_url(session["id"], trace))
    await page.set_viewport_size({"width": 1500, "height": 1100})
    await graph_ready(page)
    drawn = await page.locator("#capsem-graph g[data-node-id]").count()
    total = await page.evaluate(
        "url => fetch(url).then(r => r.json()).then(g => g.nodes.length)",
        trace_url(session["id"], trace, "/graph.json"),
    )
    assert drawn == total  # a short trace is drawn whole
    await graph_screenshot(page, "trace-graph-small.png")

    link = page.locator("#capsem-graph a.node-link:has(g[data-type='model_call'])").first
    node_id = await link.locator("g").get_attribute("data-node-id")
    # A click selects (the explorer's panel shows the row); the node links to its page.
    href = await link.get_attribute("href")
    assert "/events/" in href
    await goto(page, base + href)
    body = await page.inner_text("body")
    assert f"model_calls row {node_id.split(':')[1]}" in body and "Bodies" in body

    await page.go_back()
    await graph_ready(page)
    link = page.locator("#capsem-graph a.node-link:has(g[data-type='tool_response'])").first
    row_id = (await link.locator("g").get_attribute("data-node-id")).split(":")[1]
    await goto(page, base + await link.get_attribute("href"))
    assert page.url.endswith(f"/{session['id']}/tool_responses/{row_id}")
    assert "tool_responses" in await page.inner_text("body")
    await page.close()
    assert problems == []


async def test_broken_links_are_drawn_as_such(browser, base, manifest):
    session, defect = defect_sessions(manifest, "orphan_tool_response")[0]
    # Find the trace of the orphan response through the JSON the page itself uses.
    page, problems = await open_page(browser, base + f"/-/capsem/sessions/{session['id']}")
    traces = await page.evaluate(
        "url => fetch(url).then(r => r.json()).then(d => d.traces.map(t => t.trace_id))",
        f"/-/capsem/sessions/{session['id']}.json",
    )
    for trace in traces:
        await goto(page, base + trace_url(session["id"], trace))
        await graph_ready(page)
        if await page.locator(f"g[data-node-id='tool_responses:{defect['row_id']}']").count():
            break
    await page.set_viewport_size({"width": 1500, "height": 1100})
    await graph_screenshot(page, "trace-graph-broken.png")
    assert await page.locator("#capsem-graph path.edge.broken").count() >= 1
    assert await page.locator("#capsem-graph g.node.missing").count() >= 1
    labels = await page.locator("#capsem-graph text.edge-label").all_text_contents()
    assert any(label.startswith("Tool response with no matching") for label in labels)
    await assert_no_overlap(page)
    # A broken link's label selects the row that carries the finding.
    label = page.locator("#capsem-graph text.edge-label").first
    carrier = await label.get_attribute("data-node-id-ref")
    await label.click()
    await page.wait_for_selector(f".capsem-detail[data-loaded='{carrier}']")
    await page.close()
    assert problems == []


async def test_a_500_call_trace_collapses_and_expands(browser, long_trace, tmp_path):
    home, session_id, trace = long_trace
    with live_server(home, tmp_path / "cache", index_refresh_seconds=0) as base:
        page, problems = await open_page(browser, base + trace_url(session_id, trace))
        await page.set_viewport_size({"width": 3200, "height": 1300})
        await graph_ready(page)
        clusters = page.locator("#capsem-graph g[data-type='cluster']")
        assert await clusters.count() >= 1
        calls = await page.locator("#capsem-graph g[data-type='model_call']").count()
        assert calls < LONG_CALLS  # most of the 500 calls are folded into blocks
        await graph_screenshot(page, "trace-graph-500.png")
        await clusters.first.click()
        more = await page.locator("#capsem-graph g[data-type='model_call']").count()
        assert more > calls
        await assert_no_overlap(page)
        first_call = page.locator("#capsem-graph g[data-type='model_call']").first
        node_id = await first_call.get_attribute("data-node-id")
        await first_call.click()
        await page.wait_for_selector(f".capsem-detail[data-loaded='{node_id}']")
        assert "#node=" in page.url
        await page.close()
        assert problems == []


OVERLAPS = """() => {
    const box = e => e.getBoundingClientRect();
    const meet = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
        a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
    const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 &&
        a.top >= b.top - 0.5 && a.bottom <= b.bottom + 0.5;
    const problems = [];
    const nodes = [...document.querySelectorAll('#capsem-graph g[data-node-id]')].map(g => ({
        id: g.getAttribute('data-node-id'), rect: box(g.querySelector('rect')),
        texts: [...g.querySelectorAll('text')].map(box)}));
    const labels = [...document.querySelectorAll(
        '#capsem-graph text.edge-label, #capsem-graph text.lane-label')].map(t => ({
        text: t.textContent, rect: box(t)}));
    for (const n of nodes) {
        for (const t of n.texts) {
            if (!inside(t, n.rect)) problems.push(`label of ${n.id} leaves its box`);
        }
    }
    const texts = nodes.flatMap(n => n.texts.map(t => ({id: n.id, rect: t})))
        .concat(labels.map(l => ({id: 'label ' + l.text, rect: l.rect})));
    for (const t of texts) {
        for (const n of nodes) {
            if (n.id !== t.id && meet(t.rect, n.rect)) problems.push(`${t.id} covers ${n.id}`);
        }
    }
    for (let i = 0; i < labels.length; i++) {
        for (let j = i + 1; j < labels.length; j++) {
            if (meet(labels[i].rect, labels[j].rect)) {
                problems.push(`labels overlap: ${labels[i].text} / ${labels[j].text}`);
            }
        }
    }
    return {problems: problems.slice(0, 20), nodes: nodes.length, labels: labels.length};
}"""


async def assert_no_overlap(page) -> None:
    """No label (node, lane or broken-link label) overlaps a node or another label, measured
    on the bounding boxes Chromium laid out."""
    found = await page.evaluate(OVERLAPS)
    assert found["nodes"] > 0
    assert found["problems"] == [], found


@pytest.mark.heavy  # tens of seconds: its module is scheduled first (conftest.py)
async def test_no_label_overlaps_a_node_or_a_label(browser, base, manifest):
    sessions = clean_current(manifest)[:1] + [
        s for s, _ in defect_sessions(manifest, "orphan_tool_response")[:1]
    ]
    sessions += [s for s, _ in defect_sessions(manifest, "tool_call_without_response")[:1]]
    urls = [base + trace_url(s["id"], trace) for s in sessions for trace in s["traces"][:3]]
    checked = 0
    async for page, problems in tab_through(browser, urls):
        await page.set_viewport_size({"width": 1500, "height": 1100})
        await graph_ready(page)
        await assert_no_overlap(page)
        await page.click("#capsem-graph .capsem-expand-all")
        await assert_no_overlap(page)
        assert problems == [], urls[checked]
        checked += 1
    assert checked


async def test_hostile_text_stays_text(browser, base, manifest):
    session = hostile_session(manifest)
    urls = [base + trace_url(session["id"], trace) for trace in session["traces"]]
    async for page, problems in tab_through(browser, urls):
        await graph_ready(page)
        assert await page.evaluate("window.__pwned") is None
        assert problems == []
    huge = next(
        h
        for h in manifest["hostile"]
        if h["session"] == session["id"] and h["table"] == "event_body_blobs"
    )
    page, problems = await open_page(browser, base + f"/-/capsem/sessions/{session['id']}")
    event_id = await page.evaluate(
        """async ([sid, blob]) => {
            const r = await fetch(`/${sid}/event_body_blobs/${blob}.json?_shape=objects`);
            const d = await r.json();
            return d.rows[0].event_id;
        }""",
        [session["id"], huge["row_id"]],
    )
    await page.goto(base + f"/-/capsem/sessions/{session['id']}/events/{event_id}")
    await page.click(".capsem-body-deferred button")
    await page.wait_for_selector(".capsem-body-deferred[data-loaded='1'] pre", timeout=30000)
    assert await page.evaluate("window.__pwned") is None
    await page.close()
    assert problems == []
