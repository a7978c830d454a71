"""The session-wide timeline: every exec, tool, net, fs and model row once, in time order,
paged with no cap on the total, filterable by layer, time and trace, in every era."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from datasette_capsem.graph.waterfall import critical_path
from tests.trace_support import hostile_session, ledger, readable

pytestmark = pytest.mark.asyncio(loop_scope="session")

LAYER_TABLES = {
    "exec": "exec_events",
    "tool": "tool_calls",
    "net": "net_events",
    "fs": "fs_events",
    "model": "model_calls",
}


def url(session_id: str, query: str = "") -> str:
    return f"/-/capsem/sessions/{quote(session_id, safe='')}/timeline.json?{query}"


async def test_every_row_once_in_time_order_every_era(datasette, manifest, capsem_home, tmp_path):
    eras = set()
    for session in readable(manifest):
        if session.get("alias_of") or session["era"] in eras:
            continue
        with ledger(capsem_home, session, tmp_path) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            expected = {
                (table, r[0])
                for table in LAYER_TABLES.values()
                if table in tables
                for r in conn.execute(f"SELECT id FROM {table}")
            }
        seen, offset, previous = [], 0, None
        while True:
            data = (
                await datasette.client.get(url(session["id"], f"_size=7&_next={offset}"))
            ).json()
            for row in data["rows"]:
                seen.append((row["table"], row["row_id"]))
                key = (row["at"] or "", row["layer"], row["row_id"])
                assert previous is None or key >= previous
                previous = key
            if data["next"] is None:
                break
            offset += 7
        assert data["total"] == len(expected)
        assert len(seen) == len(set(seen)) and set(seen) == expected, session["era"]
        eras.add(session["era"])
    assert {"head", "0.9", "1.1"} <= eras


async def test_layer_time_and_trace_filters(datasette, manifest, capsem_home, tmp_path):
    session = next(s for s in readable(manifest) if s["era"] == "head" and s.get("traces"))
    full = (await datasette.client.get(url(session["id"], "_size=1000"))).json()
    for layer in LAYER_TABLES:
        data = (await datasette.client.get(url(session["id"], f"layer={layer}&_size=1000"))).json()
        assert data["total"] == sum(1 for r in full["rows"] if r["layer"] == layer)
    middle = sorted(r["at"] for r in full["rows"] if r["at"])[len(full["rows"]) // 2]
    since = (await datasette.client.get(url(session["id"], f"since={middle}&_size=1000"))).json()
    assert since["total"] == sum(1 for r in full["rows"] if (r["at"] or "") >= middle)
    trace = session["traces"][0]
    data = (await datasette.client.get(url(session["id"], f"trace_id={trace}&_size=1000"))).json()
    assert data["total"] == sum(1 for r in full["rows"] if r["trace_id"] == trace) > 0
    for bad in ("layer=bogus", "since=yesterday", "_size=0", "_size=5000", "_next=x"):
        response = await datasette.client.get(url(session["id"], bad))
        assert response.status_code == 400, bad


async def test_html_page_links_and_escapes(datasette, manifest):
    session = hostile_session(manifest)
    response = await datasette.client.get(
        f"/-/capsem/sessions/{quote(session['id'], safe='')}/timeline?_size=1000"
    )
    assert response.status_code == 200
    assert "<script>alert" not in response.text
    overview = await datasette.client.get(f"/-/capsem/sessions/{quote(session['id'], safe='')}")
    assert "/timeline" in overview.text


async def test_critical_path_steps_back_through_what_ended_last():
    """The definition (graph/waterfall.py): from the span that ends last, step back to the
    span that ends last among those that had ended when the current one started. Concurrent
    spans that end earlier are off the path; a tie on the end goes to the longer span, then
    to the first listed."""
    spans = [
        ("a", 0.0, 10.0),  # ends 10, after c started (at 5): off the path
        ("b", 12.0, 5.0),  # ends 17, concurrent with c: off the path
        ("c", 5.0, 20.0),  # ends 25, the last to end before d starts
        ("d", 30.0, 3.0),  # ends last
        ("copy", 30.0, 3.0),  # same timing as d, listed after it: d wins the tie
    ]
    assert critical_path(spans) == ["c", "d"]
    assert critical_path([("x", 0.0, 5.0), ("y", 5.5, 1.0), ("z", 7.0, 0.0)]) == ["x", "y", "z"]
    assert critical_path([]) == []
