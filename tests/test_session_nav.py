"""Leftovers of "every id is a link": Datasette's database page of a session links to the
plugin's pages of it, and the breadcrumbs of the overview and check pages name the session."""

from __future__ import annotations

import html

import pytest

from tests.helpers import session_in

pytestmark = pytest.mark.asyncio(loop_scope="session")


def named(manifest: dict, name: str) -> dict:
    return session_in(manifest, name=name)


async def test_the_database_page_of_a_session_links_to_its_pages(datasette, manifest):
    session = named(manifest, "tour-broken-trace")
    sid = session["id"]
    page = await datasette.client.get(f"/{sid}")
    assert page.status_code == 200
    text = page.text
    assert 'class="capsem-session-nav"' in text and "tour-broken-trace" in text
    for href in (
        f"/-/capsem/sessions/{sid}",
        f"/-/capsem/sessions/{sid}#traces",
        f"/-/capsem/sessions/{sid}/check",
    ):
        assert f'href="{href}"' in text, href
    assert "<script>" not in text.split('class="capsem-session-nav"')[1].split("</p>")[0]
    # Datasette's own page is still there (the template extends the default).
    assert 'class="page-header"' in text and "fs_events" in text
    main = await datasette.client.get("/main")
    assert main.status_code == 200 and "capsem-session-nav" not in main.text


@pytest.mark.parametrize("suffix", ["", "/check", "/timeline"])
async def test_breadcrumbs_name_the_session_and_link_to_its_overview(datasette, manifest, suffix):
    session = named(manifest, "tour-unanswered-call")
    overview = f"/-/capsem/sessions/{session['id']}"
    page = await datasette.client.get(overview + suffix)
    assert page.status_code == 200
    crumbs = page.text.split('<p class="crumbs">')[-1].split("</p>", 1)[0]  # the plugin's
    assert f'<a href="{overview}">{html.escape(session["name"])}</a>' in crumbs
