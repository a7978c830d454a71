"""Datasette's facet suggestions on a Capsem table run only on the columns a facet of is of
use and allowed (ledger/tables.py: SHOWN and NAMED): none on a body, a credential carrier or
free text, where each is a statement or two over the whole table (seconds on a generated
session's 10 MB bodies) for a facet no reader can use. On the other columns they are
Datasette's own, and a user's own database beside the home keeps all of its suggestions."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from datasette.app import Datasette

from datasette_capsem.ledger import tables
from tests.helpers import PLUGIN, actor_cookies
from tests.trace_support import clean_current, ledger

pytestmark = pytest.mark.asyncio(loop_scope="session")

# The column a statement of Datasette's facet suggestions reads (ColumnFacet, DateFacet and
# ArrayFacet's two; 1.0 starts some with `with limited as (...)` and quotes names with `"`).
NAME = r'[\w\[\]"]+'
SUGGESTION = re.compile(
    rf"\bselect (?:distinct json_type\(({NAME})\)|date\(({NAME})\) from"
    rf"|({NAME}) as value, count|({NAME}) from \()",
    re.IGNORECASE,
)
# A body (FREE_TEXT), credential carriers (CARRIER), and free text beside named columns.
TABLES = ("event_body_blobs", "net_events", "model_calls")


def suggested_on(data: dict, database: str) -> tuple[set[str], set[tuple[str, str]]]:
    """(columns a facet suggestion statement on `database` read, suggested (column, type)) of
    a traced table page's JSON."""
    columns = set()
    for trace in data["_trace"]["traces"]:
        if trace.get("database") != database:
            continue
        found = SUGGESTION.search(trace.get("sql") or "")
        if found:
            columns.add(next(v for v in found.groups() if v).strip('[]"'))
    suggested = {(f["name"], f.get("type", "column")) for f in data.get("suggested_facets", [])}
    return columns, suggested


async def traced(datasette: Datasette, path: str, cookies=None) -> dict:
    response = await datasette.client.get(
        f"{path}.json?_trace=1&_extra=suggested_facets", cookies=cookies or {}
    )
    assert response.status_code == 200, response.text[:300]
    return response.json()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def instance(capsem_home, tmp_path_factory, manifest):
    """A Capsem home with a copy of one of its ledgers beside it as the user's own database,
    traced; the operator sees secrets."""
    session = clean_current(manifest)[0]
    tmp_path = tmp_path_factory.mktemp("facet-suggestions")
    own = tmp_path / "mine" / "ledgercopy.db"
    own.parent.mkdir()
    shutil.copyfile(capsem_home / session["ledger"], own)
    plugin = {
        "capsem_home": str(capsem_home),
        "cache_dir": str(tmp_path / "cache"),
        "index_refresh_seconds": 0,
        "view_secrets": {"id": "operator"},
    }
    datasette = Datasette(
        [str(own)], metadata={"plugins": {PLUGIN: plugin}}, settings={"trace_debug": True}
    )
    await datasette.invoke_startup()
    return datasette, session


def file_columns(capsem_home: Path, session: dict, cache_dir: Path, table: str) -> list[str]:
    with ledger(capsem_home, session, cache_dir) as conn:
        return [
            row["name"] for row in conn.execute("select name from pragma_table_info(?)", [table])
        ]


@pytest.mark.parametrize("table", TABLES)
async def test_no_suggestion_runs_on_a_column_a_facet_of_is_of_no_use(
    instance, capsem_home, tmp_path, table
):
    datasette, session = instance
    columns = file_columns(capsem_home, session, tmp_path, table)
    kinds = {c: tables.column_kind("ledger", table, c) for c in columns}
    useful = {c for c, kind in kinds.items() if kind in (tables.SHOWN, tables.NAMED)}
    useless = set(columns) - useful
    assert useful and useless, kinds
    # The user's own copy of the ledger: Datasette's suggestions on every column, as before.
    own_read, own_suggested = suggested_on(
        await traced(datasette, f"/ledgercopy/{table}"), "ledgercopy"
    )
    assert own_read == set(columns)
    for cookies in ({}, actor_cookies(datasette, "operator")):
        page = await traced(datasette, f"/{session['id']}/{table}", cookies)
        read, suggested = suggested_on(page, session["id"])
        assert read == useful, (table, read ^ useful)
        if cookies:  # the operator reads values unmasked: Datasette's own suggestions
            assert suggested == {(c, kind) for c, kind in own_suggested if c in useful}
