"""The conversation section of the trace page in headless Chromium: each provider's body format
drawn as chat with what is new marked and the raw bodies linked, and hostile agent text (markup,
script) that stays text."""

from __future__ import annotations

import pytest

from tests import conversation_support as cs
from tests.browser import live_server, open_page, screenshot, settle
from tests.test_conversation import provider_home  # noqa: F401 (fixture)
from tests.trace_support import trace_url

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]
READY = "#capsem-conversation[data-ready='1']"


async def test_conversation_of_each_format(browser, provider_home, tmp_path):  # noqa: F811
    home, placed = provider_home
    with live_server(home, tmp_path / "cache", index_refresh_seconds=0) as base:
        for fmt, turn in placed.items():
            url = base + trace_url(turn["session"]["id"], turn["trace"]) + "#conversation"
            page, problems = await open_page(browser, url)
            await page.set_viewport_size({"width": 1400, "height": 1100})
            await page.wait_for_selector(READY, timeout=30000)  # opened by the URL's hash
            steps = page.locator(".capsem-conv-step")
            assert await steps.count() == 3, fmt
            first = steps.nth(0)
            roles = await first.locator(".capsem-msg").evaluate_all(
                "els => els.map(e => e.dataset.role + ':' + e.dataset.type)"
            )
            assert roles == ["system:text", "user:text", "assistant:text", "assistant:tool_call"]
            second = steps.nth(1)
            assert await second.locator(".capsem-msg-new[data-type='tool_result']").count() == 1
            assert "4 earlier messages repeated" in await second.inner_text()
            assert "new in step 2" in await second.inner_text()
            for side in ("request", "response"):
                href = await first.locator(f"a[data-raw='{side}']").get_attribute("href")
                assert href.startswith("/-/capsem/sessions/") and "/bodies/" in href
            call = await first.locator(".capsem-conv-head a").first.get_attribute("href")
            assert call.endswith(f"/model_calls/{turn['ids'][0]}")
            if fmt == "anthropic":
                user = first.locator(".capsem-msg[data-role='user'] .capsem-msg-text")
                assert cs.HOSTILE in await user.inner_text()
                assert await page.locator("#capsem-conversation img").count() == 0
                assert await page.locator("#capsem-conversation script").count() == 0
                assert await page.evaluate("window.__pwned === undefined")
                await screenshot(
                    page.locator("#capsem-conversation-section"), "trace-conversation.png"
                )
            # Following a raw link reaches the body page.
            await first.locator("a[data-raw='request']").click()
            await settle(page)
            assert "/bodies/" in page.url
            assert not problems, problems
            await page.close()
