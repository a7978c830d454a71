"""Multi-megabyte cells are truncated in lists, with a way to the full value."""

from __future__ import annotations

import pytest

from tests.helpers import session_in

async_test = pytest.mark.asyncio(loop_scope="session")


@async_test
async def test_huge_cells_are_cut_in_table_pages_and_whole_on_the_row_page(
    operator_datasette, manifest
):
    datasette = operator_datasette
    huge = [
        h
        for h in manifest["hostile"]
        if h["kind"] == "huge_cell" and h["table"] != "event_body_blobs"
    ]
    assert huge
    for item in huge:
        table_page = await datasette.client.get(f"/{item['session']}/{item['table']}")
        assert table_page.status_code == 200
        assert len(table_page.content) < 1_000_000, "the list shows a cut-down cell"
        row_link = f"/{item['session']}/{item['table']}/{item['row_id']}"
        assert f'href="{row_link}"' in table_page.text
        row = await datasette.client.get(f"{row_link}.json?_shape=array")
        assert len(row.json()[0][item["column"]]) > 1_000_000, "the row page has the full value"


@async_test
async def test_huge_bodies_do_not_bloat_the_session_and_trace_pages(operator_datasette, manifest):
    datasette = operator_datasette
    item = next(h for h in manifest["hostile"] if h["kind"] == "huge_cell")
    session = session_in(manifest, id=item["session"])
    pages = [f"/-/capsem/sessions/{session['id']}"]
    pages += [f"/-/capsem/sessions/{session['id']}/traces/{t}" for t in session["traces"]]
    for page in pages:
        response = await datasette.client.get(page)
        assert response.status_code == 200, page
        assert len(response.content) < 2_000_000, (page, len(response.content))
