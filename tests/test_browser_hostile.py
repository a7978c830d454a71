"""No payload the generator plants in agent-controlled columns ever runs in a browser.

Every payload tries to set `window.__pwned` (script tags, attribute breakouts, javascript:
URLs, event handlers). Pages full of them are loaded in headless Chromium: the flag must stay
unset and no dialog may open, on Datasette's own pages and on the plugin's.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.browser import live_server, open_page, tab_through

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]

PAYLOAD_QUERY = '<script>window.__pwned=1</script>"><img src=x onerror="window.__pwned=1">'


def hostile_pages(manifest: dict) -> list[str]:
    pages = [
        "/",
        "/-/capsem",
        "/main/sessions",
        f"/-/capsem/search?q={quote(PAYLOAD_QUERY)}",
        f"/-/capsem/resolve?name={quote(PAYLOAD_QUERY)}",
        f"/{quote(PAYLOAD_QUERY)}",
    ]
    seen = set()
    for item in manifest["hostile"]:
        session, table, row = item["session"], item["table"], item.get("row_id")
        if table in ("sessions", "persistent_registry.json"):
            pages.append(f"/-/capsem/sessions/{session}")
            continue
        if (session, table) in seen:
            continue
        seen.add((session, table))
        pages += [f"/{session}/{table}", f"/-/capsem/sessions/{session}"]
        if row:
            pages.append(f"/{session}/{table}/{row}")
    by_id = {s["id"]: s for s in manifest["sessions"]}
    for session in {item["session"] for item in manifest["hostile"]}:
        traces = by_id.get(session, {}).get("traces") or []
        if traces:
            pages.append(f"/-/capsem/sessions/{session}/traces/{traces[0]}")
    return list(dict.fromkeys(pages))


PARTS = 4  # the pages in parts, so both xdist workers share them


@pytest.fixture(scope="module")
def server(capsem_home, tmp_path_factory):
    """One server for the module's tests (it only reads `capsem_home`)."""
    with live_server(capsem_home, tmp_path_factory.mktemp("cache")) as base:
        yield base


@pytest.mark.heavy
@pytest.mark.parametrize("part", range(PARTS))
async def test_no_planted_payload_runs_on_any_page(browser, server, manifest, part):
    pages = hostile_pages(manifest)
    assert len(pages) > 20
    paths = pages[part::PARTS]
    async for page, problems in tab_through(browser, [server + path for path in paths]):
        path = paths.pop(0)
        pwned = await page.evaluate("() => window.__pwned")
        assert pwned is None, f"payload ran on {path}"
        assert not [p for p in problems if p.startswith("dialog")], (path, problems)


async def test_plugin_pages_send_a_csp_that_forbids_inline_script(browser, server):
    page, problems = await open_page(browser, server + "/")
    # An inline script injected after load is refused by the page's policy.
    ran = await page.evaluate(
        """() => { const s = document.createElement('script');
                   s.textContent = 'window.__inline = 1'; document.body.appendChild(s);
                   return window.__inline === 1; }"""
    )
    await page.close()
    assert ran is False
    assert not [p for p in problems if "Content Security Policy" not in p], problems
