"""The instance in a real browser: home page, a session's database and a table, no errors."""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from tests.browser import live_server, open_page, screenshot, settle
from tests.helpers import session_in

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]


def a_clean_session(manifest: dict) -> dict:
    return session_in(manifest, era="head", kind="persistent", has=("clean",))


@pytest.fixture(scope="module")
def base(capsem_home, tmp_path_factory):
    """One server for the module's tests, as served by default: its index refreshed in the
    background (they only read the home)."""
    with live_server(capsem_home, tmp_path_factory.mktemp("core-cache")) as url:
        yield url


async def test_home_session_and_table_load_without_console_errors(browser, base, manifest):
    session = a_clean_session(manifest)
    if os.environ.get("CAPSEM_SCREENSHOTS"):
        _wait_for_the_index(base)  # the README's picture shows the charts and the cost box
    for path, expected in [
        ("/", "Capsem sessions"),
        (f"/{session['id']}", "model_calls"),
        (f"/{session['id']}/model_calls", "rows"),
        (f"/-/capsem/sessions/{session['id']}", session["id"]),
    ]:
        page, problems = await open_page(browser, base + path)
        text = await page.inner_text("body")
        if path == "/":
            await page.set_viewport_size({"width": 1400, "height": 1000})
            await screenshot(page, "home.png")
        await page.close()
        assert expected in text, path
        assert not problems, (path, problems)


async def test_clicking_a_session_on_the_home_page_opens_it(browser, base, manifest):
    session = a_clean_session(manifest)
    if os.environ.get("CAPSEM_SCREENSHOTS"):
        _wait_for_the_index(base)  # the README's picture shows the charts and the cost box
    page, problems = await open_page(browser, base + "/")
    await page.click(f"a[href='/-/capsem/sessions/{session['id']}']")
    await settle(page)
    assert page.url.endswith(f"/-/capsem/sessions/{session['id']}")
    await page.close()
    assert not problems


def _wait_for_the_index(base: str) -> None:
    """Until the cross-session index has been built (bounded: a hang, not a figure)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with urllib.request.urlopen(base + "/-/capsem/index.json") as answer:
            state = json.load(answer)
        if state.get("ready") and not state.get("refreshing") and state.get("last_refresh_at"):
            return
        time.sleep(0.5)
