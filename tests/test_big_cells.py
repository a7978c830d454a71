"""Multi-megabyte cells are truncated in lists, with a way to the full value."""

from __future__ import annotations

import sqlite3

import pytest
from markupsafe import escape

from tests.helpers import make_datasette, session_in

async_test = pytest.mark.asyncio(loop_scope="session")


def huge_text_cell(manifest: dict) -> dict:
    """The generated huge text cell (a 3 MB request preview): its session, table, column, row."""
    return next(
        h
        for h in manifest["hostile"]
        if h["kind"] == "huge_cell" and h["table"] != "event_body_blobs"
    )


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


@async_test
async def test_a_huge_cell_is_cut_on_its_row_page_with_a_link_to_the_whole_value(
    operator_datasette, manifest
):
    """Datasette never cuts a row page's cells: a 3 MB preview made a 4.8 MB page. The row page
    shows the value's head, "…" and a link to the row's JSON, which holds the whole value."""
    item = huge_text_cell(manifest)
    row_link = f"/{item['session']}/{item['table']}/{item['row_id']}"
    page = await operator_datasette.client.get(row_link)
    assert page.status_code == 200
    assert len(page.content) < 200_000, len(page.content)
    whole = await operator_datasette.client.get(f"{row_link}.json?_shape=array")
    value = whole.json()[0][item["column"]]
    assert len(value) > 1_000_000
    assert f'href="{row_link}.json"' in page.text
    assert f"{len(value):,} characters" in page.text
    assert str(escape(value[:2048])) + "\u2026" in page.text  # the head, as Datasette escapes it


@async_test
async def test_a_credential_at_the_cut_of_a_huge_cell_is_masked(manifest, private_home, tmp_path):
    """The cut may fall inside a credential: its head before "…" is masked as the whole
    token would be, for a reader without view_secrets; the operator sees it."""
    item = huge_text_cell(manifest)
    token = "ghp_Nm4kQ8zR2vX6wT1yB5cH9jL3pD7fG0sA2eU4"
    value = "x" * 2040 + token + " " + "y" * 100_000  # the cut (2,048) 8 characters in
    session = session_in(manifest, id=item["session"])
    conn = sqlite3.connect(private_home / session["ledger"])
    conn.execute(
        f"UPDATE {item['table']} SET {item['column']} = ? WHERE id = ?", (value, item["row_id"])
    )
    conn.commit()
    conn.close()
    row_link = f"/{item['session']}/{item['table']}/{item['row_id']}"
    viewer = await make_datasette(private_home, tmp_path / "cache")
    page = await viewer.client.get(row_link)
    assert page.status_code == 200 and "the whole value" in page.text
    assert token[:8] not in page.text and "[redacted:" in page.text
    operator = await make_datasette(private_home, tmp_path / "cache-operator", view_secrets=True)
    page = await operator.client.get(row_link)
    assert token[:8] + "\u2026" in page.text  # the test can fail: the head is at the cut
