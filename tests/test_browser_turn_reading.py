"""Reading a turn in headless Chromium (issue 28, points 1-4), as a user clicks: a model call's
detail panel reads as chat and links to its step of the conversation; turns are told apart by
what was asked and how the reply began; a long turn's conversation folds by step with an index
and its long system prompt folded; the trace page works at 800 px; the timeline's axis labels
do not overlap at 1,400 px; Enter in "Search this trace" steps through every match."""

from __future__ import annotations

import json
import random
import sqlite3
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from datasette_capsem.generate.content import SessionShape, blake3_ref, build_session
from datasette_capsem.generate.rows import write_ledger
from tests.browser import live_server, open_page, screenshot, settle
from tests.test_turn_reading import ASKED, SECRET, reading_home  # noqa: F401 (fixture)
from tests.trace_support import session_url, trace_url

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]
TREE = ".capsem-explorer[data-ready='1']"
LONG_STEPS = 12
LONG_SYSTEM = "You are a careful coding agent. " + "Follow the house rules. " * 1700  # ~40 KB
TOOLS = ("read_file", "bash", "grep", "edit_file")


def _long_bodies(step: int) -> tuple[str, str]:
    """Anthropic bodies of step `step` of a long turn: a 40 KB system prompt, the history of
    the tool calls before it, and a tool call (a text answer at the last step)."""
    messages: list[dict] = [{"role": "user", "content": "Make the whole test suite pass"}]
    for done in range(step):
        name = TOOLS[done % len(TOOLS)]
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{done}", "name": name, "input": {"n": done}}
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{done}", "content": f"ok {done}"}
                ],
            }
        )
    request = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "temperature": 0.2,
        "system": LONG_SYSTEM,
        "messages": messages,
    }
    if step < LONG_STEPS - 1:
        name = TOOLS[step % len(TOOLS)]
        content = [{"type": "tool_use", "id": f"toolu_{step}", "name": name, "input": {"n": step}}]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": "All 42 tests pass now."}]
        stop = "end_turn"
    response = {"type": "message", "role": "assistant", "content": content, "stop_reason": stop}
    return json.dumps(request), json.dumps(response)


@pytest.fixture(scope="module")
def long_turn(tmp_path_factory) -> tuple[Path, str, str]:
    """A home with one session whose turn has 12 model calls over 4 minutes, its bodies
    Anthropic's with a 40 KB system prompt: (home, session id, trace id)."""
    rng = random.Random(28)
    start = datetime(2026, 8, 1, 9, 0, tzinfo=timezone.utc)
    builder = build_session(rng, "head", start, SessionShape(traces=1, calls=LONG_STEPS))
    session_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    home = tmp_path_factory.mktemp("long-turn") / "home"
    ledger = home / "run" / "sessions" / session_id / "session.db"
    write_ledger(ledger, "head", builder.ledger)
    trace = builder.ledger.rows["model_calls"][0]["trace_id"]
    conn = sqlite3.connect(ledger)
    try:
        rows = conn.execute(
            "SELECT id, event_id FROM model_calls WHERE trace_id = ? ORDER BY timestamp, id",
            (trace,),
        ).fetchall()
        assert len(rows) == LONG_STEPS
        for step, (row_id, event_id) in enumerate(rows):
            request, response = _long_bodies(step)
            # One call every 20 s: a 4-minute turn, whose axis labels read "117 s" and more.
            at = (start + timedelta(seconds=20 * step)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            conn.execute(
                "UPDATE model_calls SET provider = 'anthropic', path = '/v1/messages', "
                "model = 'claude-sonnet-4-5', timestamp = ?, "
                "request_body_preview = ? WHERE id = ?",
                (at, request, row_id),
            )
            for direction, body in (("request", request), ("response", response)):
                data = body.encode()
                conn.execute(
                    "UPDATE event_body_blobs SET body = ?, original_bytes = ?, stored_bytes = ?, "
                    "truncated = 0, body_hash = ?, content_type = 'application/json' "
                    "WHERE event_id = ? AND source_table = 'model_calls' AND direction = ?",
                    (data, len(data), len(data), blake3_ref(data), event_id, direction),
                )
        conn.commit()
    finally:
        conn.close()
    return home, session_id, trace


@pytest.fixture(scope="module")
def reading_server(reading_home, tmp_path_factory):  # noqa: F811
    """One server over the reading home for the module's tests (they only read it)."""
    cache = tmp_path_factory.mktemp("reading-cache")
    with live_server(reading_home[0], cache, index_refresh_seconds=0) as url:
        yield url


@pytest.fixture(scope="module")
def long_server(long_turn, tmp_path_factory):
    """One server over the long turn's home for the module's tests (they only read it)."""
    cache = tmp_path_factory.mktemp("long-turn-cache")
    with live_server(long_turn[0], cache, index_refresh_seconds=0) as url:
        yield url


async def test_model_call_panel_reads_as_chat(browser, reading_home, reading_server):  # noqa: F811
    home, placed = reading_home
    turn = placed["anthropic"]
    call = turn["ids"][1]
    url = (
        reading_server
        + trace_url(turn["session"]["id"], turn["trace"])
        + f"#node=model_calls:{call}"
    )
    page, problems = await open_page(browser, url)
    await page.set_viewport_size({"width": 1400, "height": 1100})
    await page.wait_for_selector(f".capsem-detail[data-loaded='model_calls:{call}']")
    panel = page.locator(".capsem-detail")
    chat = panel.locator(".capsem-call-chat")
    roles = await chat.locator(".capsem-call-input > .capsem-msg").evaluate_all(
        "els => els.map(e => e.dataset.role + ':' + e.dataset.type)"
    )
    assert roles == [
        "system:text",
        "user:text",
        "assistant:text",
        "assistant:tool_call",
        "tool:tool_result",
    ]
    tool = chat.locator(".capsem-call-input .capsem-msg[data-type='tool_call']")
    assert await tool.locator(".capsem-msg-tool").inner_text() == "read_file"
    assert await tool.locator("pre").inner_text() == '{\n  "path": "a.py"\n}'  # pretty JSON
    output = chat.locator(".capsem-call-output .capsem-msg")
    assert await output.count() == 1
    assert await output.locator(".capsem-msg-tool").inner_text() == "bash"
    # The response comes after the request: the output below the input, bodies in order.
    boxes = await chat.locator("h4").all_inner_texts()
    assert boxes[0].startswith("Input") and boxes[1].startswith("Output")
    assert "Model parameters" in boxes
    params = await chat.locator(".capsem-call-parameters").inner_text()
    assert "max_tokens\t8192" in params and "claude-sonnet-4-20250514" in params
    sides = await panel.locator(".capsem-detail-body h5").all_inner_texts()
    assert [s.split(" ")[0] for s in sides] == ["request", "response"]
    # The raw columns are one fold away, folded.
    assert not await panel.locator(".capsem-detail-columns").get_attribute("open")
    # A viewer sees the credential masked; hostile text stays text.
    user = await chat.locator(".capsem-msg[data-role='user'] pre").inner_text()
    assert "PLANTEDSECRET" not in user and "[redacted:" in user and "<img" in user
    assert await page.locator(".capsem-detail img, .capsem-detail script").count() == 0
    assert await page.evaluate("window.__pwned === undefined")
    await screenshot(page.locator(".capsem-explorer"), "trace-call-chat.png")
    # Its step in the conversation is one click away.
    await chat.locator("a.capsem-to-step").click()
    await page.wait_for_selector("#capsem-conversation[data-ready='1']")
    step = page.locator("#conversation-step-2")
    await step.wait_for()
    assert await step.get_attribute("open") is not None
    assert await page.locator("#capsem-conversation-section").get_attribute("open") is not None
    assert await step.evaluate(
        "e => { const r = e.getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; }"
    )
    assert not problems, problems
    await page.close()


async def test_turns_told_apart_by_what_was_asked(browser, reading_home, reading_server):  # noqa: F811
    home, placed = reading_home
    turn = placed["anthropic"]
    page, problems = await open_page(
        browser, reading_server + session_url(turn["session"]["id"]) + "?_size=500"
    )
    await page.set_viewport_size({"width": 1400, "height": 1000})
    row = page.locator("table.capsem-traces tr", has=page.locator(f"a[href$='{turn['trace']}']"))
    text = await row.inner_text()
    assert "Use key [redacted:" in text and "PLANTEDSECRET" not in text
    assert "fix the failing test" in text
    await screenshot(page.locator("table.capsem-traces"), "session-turns.png")
    await row.locator(f"a[href$='{turn['trace']}']").first.click()
    await settle(page)
    await page.wait_for_selector(TREE)
    title = await page.title()
    assert title.startswith("“Use key [redacted:") and turn["trace"] in title
    assert "PLANTEDSECRET" not in title
    header = await page.locator("dl.capsem-turn-preview").inner_text()
    assert "Asked" in header and "Reply began" in header
    # Model rows say which tools they called, or how the reply began.
    whats = await page.locator(".capsem-span-model_call .capsem-span-what").all_inner_texts()
    conn = sqlite3.connect(f"file:{home / turn['session']['ledger']}?mode=ro", uri=True)
    try:
        first = conn.execute(
            "SELECT tool_name FROM tool_calls WHERE model_call_id = ? ORDER BY call_index, id",
            (turn["ids"][0],),
        ).fetchall()
    finally:
        conn.close()
    assert whats[0] == "→ " + ", ".join(name for (name,) in first)
    assert len(whats) == 3 and all(w.startswith(("→ ", "“")) for w in whats)
    assert any(w.startswith("“") for w in whats)  # the last reply's first words
    assert not problems, problems
    await page.close()


async def test_long_conversation_folds_by_step(browser, long_turn, long_server):
    home, session_id, trace = long_turn
    page, problems = await _open_long(browser, long_server, session_id, trace)
    await page.locator("#capsem-conversation-section > summary").click()
    await page.wait_for_selector("#capsem-conversation[data-ready='1']")
    steps = page.locator(".capsem-conv-step")
    assert await steps.count() == LONG_STEPS
    opened = await steps.evaluate_all("els => els.filter(e => e.open).length")
    assert opened == 0  # a long turn starts folded: one line per step
    heads = await page.locator(".capsem-conv-step > summary").all_inner_texts()
    assert "→ read_file" in heads[0] and "All 42 tests pass now." in heads[-1]
    height = await page.locator("#capsem-conversation").evaluate("e => e.offsetHeight")
    # The step index jumps to a step and opens it.
    await page.locator(".capsem-conv-index a", has_text="9").first.click()
    ninth = page.locator("#conversation-step-9")
    assert await ninth.get_attribute("open") is not None
    assert page.url.endswith("#conversation-step-9")
    assert await ninth.evaluate(
        "e => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; }"
    )
    # Step 1: its 40 KB system prompt is folded, its first words in the fold's line.
    await page.locator(".capsem-conv-index a", has_text="1").first.click()
    first = page.locator("#conversation-step-1")
    system = first.locator(".capsem-msg[data-role='system'] details.capsem-msg-fold")
    assert await system.count() == 1
    assert await system.get_attribute("open") is None
    assert "You are a careful coding agent." in await system.locator("summary").inner_text()
    # Folded: its text not drawn. (Not offsetHeight: Chromium lays out a closed <details>'
    # content, hidden by content-visibility, and reports its height.)
    assert await system.get_attribute("open") is None
    assert await system.locator("pre").evaluate("e => e.checkVisibility()") is False
    await page.locator(".capsem-conv-expand").click()
    expanded = await page.locator("#capsem-conversation").evaluate("e => e.offsetHeight")
    assert expanded > height * 3
    await page.locator(".capsem-conv-collapse").click()
    assert await steps.evaluate_all("els => els.filter(e => e.open).length") == 0
    # A step opened by hand stays open when the reader clicks elsewhere on the page.
    await page.locator("#conversation-step-3 > summary").click(position={"x": 4, "y": 8})
    await page.locator("h1").click()
    assert await page.locator("#conversation-step-3").get_attribute("open") is not None
    assert await page.locator("#capsem-conversation-section").get_attribute("open") is not None
    await screenshot(page.locator("#capsem-conversation-section"), "trace-conversation-steps.png")
    assert not problems, problems
    await page.close()


async def _open_long(browser, base: str, session_id: str, trace: str, width: int = 1400):
    """The long turn's trace page at `width` px, its span tree drawn: (page, problems)."""
    page, problems = await open_page(browser, base + trace_url(session_id, trace))
    await page.set_viewport_size({"width": width, "height": 1000})
    await page.wait_for_selector(TREE)
    return page, problems


async def _overlaps(page, selector: str) -> list:
    """Pairs of the elements `selector` matches whose boxes overlap (visible ones only)."""
    return await page.evaluate(
        """sel => {
          const boxes = [...document.querySelectorAll(sel)]
            .map(e => [e.textContent.trim(), e.getBoundingClientRect()])
            .filter(([, r]) => r.width > 0 && r.height > 0);
          const found = [];
          for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
            const [a, r] = boxes[i], [b, s] = boxes[j];
            if (r.left < s.right - 0.5 && s.left < r.right - 0.5 &&
                r.top < s.bottom - 0.5 && s.top < r.bottom - 0.5) found.push([a, b]);
          }
          return found;
        }""",
        selector,
    )


async def test_trace_page_at_800_px(browser, long_turn, long_server):
    home, session_id, trace = long_turn
    page, problems = await _open_long(browser, long_server, session_id, trace, 800)
    await page.locator(".capsem-tree-expand").click()
    # Span names readable: each model row's name column shows its model name whole.
    cut = await page.evaluate(
        """() => [...document.querySelectorAll('.capsem-span-model_call .capsem-node-link')]
          .filter(a => a.getBoundingClientRect().width < a.scrollWidth - 1
                       || a.getBoundingClientRect().width < 40)
          .map(a => a.textContent)"""
    )
    assert not cut, cut
    names = await page.evaluate(
        "() => Math.min(...[...document.querySelectorAll('.capsem-span .capsem-col-name')]"
        ".map(e => e.getBoundingClientRect().width))"
    )
    assert names >= 200
    # The toolbar's controls and the list's header do not overlap each other.
    assert not await _overlaps(page, ".capsem-explorer-toolbar > *")
    assert not await _overlaps(page, ".capsem-lanes > label")
    assert not await _overlaps(page, ".capsem-tree-head > span")
    # Token figures are never cut.
    tokens = await page.evaluate(
        """() => [...document.querySelectorAll('.capsem-col-tok')]
          .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"""
    )
    assert not tokens, tokens
    await screenshot(page, "trace-800px.png", full_page=False)
    assert not problems, problems
    await page.close()


async def test_timeline_axis_labels_do_not_overlap_at_1400_px(browser, long_turn, long_server):
    home, session_id, trace = long_turn
    page, problems = await _open_long(browser, long_server, session_id, trace)
    ticks = await page.locator(".capsem-tick").all_inner_texts()
    assert len(ticks) >= 2
    assert not await _overlaps(page, ".capsem-tick")
    clipped = await page.evaluate(
        """() => [...document.querySelectorAll('.capsem-tick')]
          .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent)"""
    )
    assert not clipped, clipped
    assert not problems, problems
    await page.close()


async def test_search_enter_steps_through_every_match(browser, long_turn, long_server):
    home, session_id, trace = long_turn
    page, problems = await _open_long(browser, long_server, session_id, trace)
    search = page.locator(".capsem-trace-search")
    await search.fill("claude-sonnet-4-5")
    await page.wait_for_function(
        "() => /^[0-9]+ match/.test(document.querySelector('.capsem-match-note').textContent)"
    )
    matches = await page.evaluate("() => window.capsemExplorer.matchList.slice()")
    assert len(matches) >= LONG_STEPS
    seen = []
    for _ in matches:
        await search.press("Enter")
        seen.append(await page.evaluate("() => window.capsemExplorer.selected"))
        assert await page.evaluate(
            "() => document.activeElement === document.querySelector('.capsem-trace-search')"
        )
    assert seen == matches  # every match, in order, the focus kept in the box
    await search.press("Enter")  # and round again
    assert await page.evaluate("() => window.capsemExplorer.selected") == matches[0]
    note = await page.locator(".capsem-match-note").inner_text()
    assert note.startswith(f"1 of {len(matches)}")
    assert not problems, problems
    await page.close()
