"""Per-session summaries (Capsem's Stats tabs): every figure equals independent SQL over the
ledger and the count of the rows its link lists, in every era; an era without a table shows no
section and no error; hostile values are escaped."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from datasette_capsem.ledger.tables import SHOWN, column_kind
from tests.trace_support import hostile_session, ledger, readable

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Written here, independently of session/stats.py: (section, label) -> SQL giving the figure.
INDEPENDENT = {
    ("HTTP", "Requests"): "SELECT COUNT(*) FROM net_events",
    ("HTTP", "Allowed"): "SELECT COUNT(*) FROM net_events WHERE decision = 'allowed'",
    ("HTTP", "Denied"): "SELECT COUNT(*) FROM net_events WHERE decision = 'denied'",
    ("HTTP", "Error"): "SELECT COUNT(*) FROM net_events WHERE decision = 'error'",
    ("HTTP", "Bytes in"): "SELECT TOTAL(bytes_received) FROM net_events",
    ("HTTP", "Bytes out"): "SELECT TOTAL(bytes_sent) FROM net_events",
    ("DNS", "Queries"): "SELECT COUNT(*) FROM dns_events",
    ("DNS", "Denied"): "SELECT COUNT(*) FROM dns_events WHERE decision = 'denied'",
    ("DNS", "Redirected"): "SELECT COUNT(*) FROM dns_events WHERE decision = 'redirected'",
    ("DNS", "Error"): "SELECT COUNT(*) FROM dns_events WHERE decision = 'error'",
    ("DNS", "Avg upstream (ms)"): "SELECT ROUND(AVG(upstream_resolver_ms), 1) FROM dns_events",
    ("Processes", "Execs"): "SELECT COUNT(*) FROM exec_events",
    ("Processes", "Failures (exit ≠ 0)"): "SELECT COUNT(*) FROM exec_events WHERE exit_code <> 0",
    ("Processes", "Observed processes"): "SELECT COUNT(*) FROM audit_events",
    ("Processes", "Unique binaries"): "SELECT COUNT(DISTINCT exe) FROM audit_events",
    ("Credentials", "Broker events"): "SELECT COUNT(*) FROM substitution_events",
    ("Security", "Rule matches"): "SELECT COUNT(*) FROM security_rule_events",
    ("Security", "Detections"): "SELECT COUNT(*) FROM security_rule_events"
    " WHERE detection_level IS NOT NULL AND detection_level <> 'none'",
    ("Security", "Enforcements (not allowed)"): "SELECT COUNT(*) FROM security_decision_events"
    " WHERE effective_decision <> 'allow'",
}
for outcome in ("captured", "brokered", "injected", "error"):
    INDEPENDENT[("Credentials", outcome.capitalize())] = (
        f"SELECT COUNT(*) FROM substitution_events WHERE outcome = '{outcome}'"
    )
for origin in ("mcp", "mcp_proxy"):
    INDEPENDENT[("MCP", f"Calls ({origin})")] = (
        f"SELECT COUNT(*) FROM tool_calls WHERE origin = '{origin}'"
    )
    INDEPENDENT[("MCP", f"Errors ({origin})")] = (
        f"SELECT COUNT(*) FROM tool_calls WHERE origin = '{origin}' AND status = 'error'"
    )
INDEPENDENT[("MCP", "Calls")] = "SELECT COUNT(*) FROM mcp_calls"
# Figures that are sums or averages: their link lists the rows behind them, not a count.
NOT_COUNTS = {"Bytes in", "Bytes out", "Avg upstream (ms)", "Unique binaries"}
SECTION_TABLES = {
    "HTTP": "net_events",
    "DNS": "dns_events",
    "Credentials": "substitution_events",
    "Security": "security_rule_events",
}


def one_per_era(manifest: dict) -> list[dict]:
    chosen: dict[str, dict] = {}
    for session in readable(manifest):
        if not session.get("alias_of"):
            chosen.setdefault(session["era"], session)
    return list(chosen.values())


def tables_of(conn) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def link_count(datasette, href: str) -> int:
    path, _, query = href.partition("?")
    # 0.65 always gives `filtered_table_rows_count`; 1.0 gives `count` when asked (`_extra`)
    response = await datasette.client.get(f"{path}.json?{query}&_size=0&_extra=count")
    assert response.status_code == 200, (href, response.text[:300])
    data = response.json()
    return data["count"] if "count" in data else data["filtered_table_rows_count"]


async def test_every_figure_equals_independent_sql_and_its_link(
    datasette, manifest, capsem_home, tmp_path
):
    eras = set()
    checked = 0
    for session in one_per_era(manifest):
        data = (
            await datasette.client.get(f"/-/capsem/sessions/{quote(session['id'])}.json")
        ).json()
        with ledger(capsem_home, session, tmp_path) as conn:
            tables = tables_of(conn)
            shown = {s["name"] for s in data["stats"]}
            for name, table in SECTION_TABLES.items():
                assert (name in shown) == (table in tables), (session["era"], name)
            for section in data["stats"]:
                for figure in section["figures"]:
                    key = (section["name"], figure["label"])
                    if key in INDEPENDENT:
                        expected = conn.execute(INDEPENDENT[key]).fetchone()[0]
                        assert figure["value"] == expected, (session["era"], key)
                        checked += 1
                    if figure["label"] not in NOT_COUNTS and figure["href"] is not None:
                        assert await link_count(datasette, figure["href"]) == figure["value"], key
                for group in section["groups"]:
                    for row in group["rows"]:
                        if row["href"] is None:  # filtered on a column not shown raw
                            assert any(
                                column_kind("ledger", row["table"], c.split("__")[0]) != SHOWN
                                for c in row["filters"]
                            ), row
                            continue
                        assert await link_count(datasette, row["href"]) == row["value"], (
                            section["name"],
                            group["title"],
                            row["label"],
                        )
                for listing in section["lists"]:
                    for row in listing["rows"]:
                        assert (await datasette.client.get(row["href"])).status_code == 200
        eras.add(session["era"])
    assert checked > 50
    assert {"head", "0.9", "1.1", "1.3", "migrated"} <= eras


async def test_an_old_file_shows_what_it_has(datasette, manifest):
    old = next(s for s in readable(manifest) if s["era"] == "0.9")
    response = await datasette.client.get(f"/-/capsem/sessions/{quote(old['id'])}")
    assert response.status_code == 200
    data = (await datasette.client.get(f"/-/capsem/sessions/{quote(old['id'])}.json")).json()
    assert {s["name"] for s in data["stats"]} <= {"HTTP", "MCP", "Processes"}


async def test_summaries_escape_hostile_values(datasette, manifest):
    session = hostile_session(manifest)
    html = (await datasette.client.get(f"/-/capsem/sessions/{quote(session['id'])}")).text
    assert "Summaries" in html
    assert "<script>alert" not in html.lower().replace(" ", "")
