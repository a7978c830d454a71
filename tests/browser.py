"""Headless Chromium harness: a real server on loopback and Playwright driving Debian's Chromium.

The `browser` fixture is registered in conftest.py; test modules import the helpers:

    from tests.browser import goto, live_server, open_page, screenshot, settle, tab_through

Pages are waited for with `settle` (what `open_page` and `goto` do), never Playwright's
`networkidle`: that one always waits a fixed 500 ms after the last request, about a minute of
a suite run over its hundred-odd page loads.

Browser tests skip with a stated reason when Chromium is absent, except in CI (env CI set),
where its absence is a failure: `.ci/run` installs it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
import uvicorn
from datasette.app import Datasette

CHROMIUM = "/usr/bin/chromium"
README_SCREENSHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing in CI; .ci/run should have installed it")
    pytest.skip(f"Debian's Chromium is not installed at {CHROMIUM} (apt-get install chromium)")


async def screenshot(target, name: str, **options) -> None:
    """A picture of `target` (a page, or a locator) as docs/screenshots/`name`, taken when
    CAPSEM_SCREENSHOTS=1 to refresh the README's. Otherwise none is taken (each cost ~0.3 s of
    CPU: the encoding, the bytes through Playwright's driver, for a scratch copy no one
    looked at); a locator is still waited for visible, as its picture waited (strict, too)."""
    if not os.environ.get("CAPSEM_SCREENSHOTS"):
        if hasattr(target, "wait_for"):  # a Locator
            await target.wait_for(state="visible")
        return
    README_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await target.screenshot(path=str(README_SCREENSHOTS / name), **options)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def live_server(home: Path | None, cache_dir: Path, files: tuple = (), **plugin_config):
    """Serve `home` with the plugin on a loopback port in a background thread; yields base URL.
    `home` None: the homes are in `plugin_config` (`homes`, `homes_dir`). `files`: databases
    of the user's own served beside it (a mixed instance)."""
    config = {
        **({"capsem_home": str(home)} if home else {}),
        "cache_dir": str(cache_dir),
        **plugin_config,
    }
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            Datasette(
                [str(f) for f in files], metadata={"plugins": {"datasette-capsem": config}}
            ).app(),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
        )
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            # A bare connect first, every 50 ms: an HTTP client per try (its TLS context) cost
            # ~40 ms of CPU, most of the wait's 50 ms, for the second or so a server takes.
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            httpx.get(base + "/-/versions.json", timeout=1)
            break
        except (OSError, httpx.HTTPError):
            time.sleep(0.05)
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser():
    require_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        instance = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield instance
        await instance.close()


# Tabs given back by `page.close()`, blank and ready for the next `open_page`: a new tab costs
# a renderer process and Playwright's set-up of a page, about 0.4 s of CPU each (measured:
# 30 new tabs ~15 s more than 30 navigations of one), for the suite's fifty-odd pages.
_SPARE_TABS: list = []
DEFAULT_VIEWPORT = {"width": 1280, "height": 720}  # a new context's, which a given-back tab regains


async def open_page(browser, url: str, *, fresh: bool = False):
    """Open `url`; returns (page, problems) where problems collects console errors, page
    errors, failed requests and dialogs (dismissed) as they happen.

    The tab is as a new one would be (blank history aside: no cookies, an empty HTTP cache,
    the default viewport) but often one a test gave back: its `close()` blanks it and keeps it
    for the next call. `fresh`: a tab of its own, really closed by `close()`, for a test that
    changes the tab for good (`page.clock.install()` stays for every later document)."""
    page = await _a_tab(browser, fresh)
    problems: list[str] = []
    seen: set = set()  # this call's requests: a failure of an earlier test's is not its problem

    def console(message) -> None:
        if message.type == "error":
            problems.append(f"console: {message.text}")

    def started(request) -> None:
        seen.add(request)

    def failed(request) -> None:
        if request in seen:
            problems.append(f"requestfailed: {request.url}")

    async def refuse_dialog(dialog):
        problems.append(f"dialog: {dialog.message}")
        await dialog.dismiss()

    listeners = {
        "request": started,
        "console": console,
        "pageerror": lambda e: problems.append(f"pageerror: {e}"),
        "requestfailed": failed,
        "dialog": refuse_dialog,
    }
    for event, listener in listeners.items():
        page.on(event, listener)
    if not fresh:
        page.close = lambda **_: _give_back(page, listeners)
    _Network.watch(page)
    await goto(page, url)
    return page, problems


async def _a_tab(browser, fresh: bool):
    while _SPARE_TABS and not fresh:
        page = _SPARE_TABS.pop()
        if not page.is_closed() and page.context.browser is browser:
            return page
    return await browser.new_page()


async def _give_back(page, listeners: dict) -> None:
    """`close()` of a tab from `open_page`: blank it as a new tab is (no listener of the test,
    no cookie, an empty cache, the default size) and keep it for the next `open_page`."""
    for event, listener in listeners.items():
        page.remove_listener(event, listener)
    del page.close  # the class's own close again, for the session's end or a failure below
    try:
        await page.goto("about:blank")
        await page.set_viewport_size(DEFAULT_VIEWPORT)
        await page.context.clear_cookies()
        session = await page.context.new_cdp_session(page)
        await session.send("Network.clearBrowserCache")
        await session.detach()
    except Exception:  # a tab that cannot be blanked is closed, as it would have been
        await page.close()
        return
    network = _Network.watch(page)
    network.pending.clear()
    _SPARE_TABS.append(page)


# Elements the plugin's scripts mark when their fetch-and-draw is over: data-ready "1" or
# "error", and data-state "loading" until a fetch it started is answered (a conversation keeps
# "loading" beside its data-ready). The graph fetches only once the tree is drawn, so between
# the two fetches the network is quiet while the page is not done.
PENDING = ", ".join(
    (
        ".capsem-explorer[data-tree-url]:not([data-ready])",
        ".capsem-graph[data-graph-url]:not([data-ready])",
        "[data-state='loading']:not([data-ready])",
    )
)
QUIET = 0.1  # seconds with no request in flight that count as "the network is done"
HANG_GUARD = 30.0


class _Network:
    """The requests of a page in flight, from Playwright's request events."""

    def __init__(self) -> None:
        self.pending: set = set()
        self.changed = asyncio.Event()
        self.last = time.monotonic()

    @classmethod
    def watch(cls, page) -> _Network:
        network = getattr(page, "_capsem_network", None)
        if network is None:
            network = page._capsem_network = cls()
            page.on("request", network.started)
            page.on("requestfinished", network.ended)
            page.on("requestfailed", network.ended)
        return network

    def started(self, request) -> None:
        self.pending.add(request)
        self._touch()

    def ended(self, request) -> None:
        self.pending.discard(request)
        self._touch()

    def _touch(self) -> None:
        self.last = time.monotonic()
        self.changed.set()

    async def quiet(self, seconds: float) -> None:
        deadline = time.monotonic() + HANG_GUARD
        while True:
            idle = time.monotonic() - self.last
            if not self.pending and idle >= seconds:
                return
            assert time.monotonic() < deadline, f"requests still in flight: {self.pending}"
            self.changed.clear()
            wait = seconds - idle if not self.pending else HANG_GUARD
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(wait, HANG_GUARD))


async def settle(page, *, loaded: bool = False) -> None:
    """Until the page has loaded, no request has been in flight for QUIET seconds and every
    script-drawn part of it says it is done: all `networkidle` promised (every fetch answered,
    so failures and console errors are in `problems`), without its fixed 500 ms."""
    network = _Network.watch(page)
    if not loaded:
        await page.wait_for_load_state("load")
    await network.quiet(QUIET)
    await page.wait_for_selector(PENDING, state="detached", timeout=HANG_GUARD * 1000)
    await network.quiet(QUIET)


async def tab_through(browser, urls):
    """Open each of `urls` in turn in one tab: yields (page, problems) per URL, `problems`
    holding what that page did (as `open_page`'s). Each navigation is a new document with its
    own `window`, so a flag a page's script sets is that page's; the tab is closed at the end.
    A tab per URL cost a renderer process each, about half of a page-walking test's time."""
    page = problems = None
    try:
        for url in urls:
            if page is None:
                page, problems = await open_page(browser, url)
            else:
                del problems[:]
                await goto(page, url)
            yield page, problems
    finally:
        if page is not None:
            await page.close()


async def goto(page, url: str):
    """page.goto, then `settle`: returns the main response."""
    _Network.watch(page)
    response = await page.goto(url, wait_until="load")
    await settle(page, loaded=True)
    return response
