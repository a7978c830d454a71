"""Odd numbers and odd hashes planted in a private generated home (the test plays Capsem).

Numbers: NaN, infinities, 1e300 and the last instant of year 9999 in durations, costs, token
counts and timestamps. The trace, event and session pages never answer 500, every JSON they
serve is strict (no bare NaN or Infinity, which browsers refuse), and the waterfall and the
OTLP export leave the unusable values out.

Hashes: blobs whose body_hash is odd (a truncated body hashed before it was cut, upper-case
hex, a plain mismatch, a body stored as TEXT or NULL). The integrity check and the pages (trace
graph, event page, body page) give each blob the same verdict.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
import pytest
import pytest_asyncio
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.catalog import Catalog
from datasette_capsem.checks import check_session
from datasette_capsem.config import load_settings
from datasette_capsem.graph.timeparse import iso_from_ms, parse_ms, parse_ns
from datasette_capsem.graph.values import as_float, json_dumps
from datasette_capsem.ledger.bodies import hash_verdict
from datasette_capsem.readonly import open_readonly
from tests.helpers import make_datasette, sessions_in
from tests.trace_support import event_url, session_url, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")

LAST_INSTANT = "9999-12-31T23:59:59.999999Z"
INFINITY = 9e999  # what a REAL overflowing to Infinity looks like to SQLite
YEAR_10000_NS = 253_402_300_800 * 1_000_000_000


def strict_json(text: str) -> Any:
    """json.loads that refuses NaN, Infinity and -Infinity, as a browser's JSON.parse does."""

    def refuse(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def iso_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and parse_ns(value) is not None)


@dataclass
class Planted:
    """Where each odd value went: (table, row id) per plant name, and the traces touched."""

    home: Path
    session: str  # session holding the odd numbers
    ledger: Path = Path()  # its session.db
    traces: dict[str, str] = field(default_factory=dict)  # plant group -> trace id
    rows: dict[str, tuple[str, int]] = field(default_factory=dict)  # plant -> (table, id)
    blob_session: str = ""
    blob_trace: str = ""
    blobs: dict[str, int] = field(default_factory=dict)  # blob plant -> blob id
    blob_events: dict[int, str] = field(default_factory=dict)  # blob id -> event id


def _first(conn: sqlite3.Connection, sql: str, params=()) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None, sql
    return row[0]


def _plant(conn, planted: Planted, name: str, table: str, trace: str, column: str, value, where=""):
    row_id = _first(
        conn, f"SELECT id FROM {table} WHERE trace_id = ? {where} ORDER BY id LIMIT 1", [trace]
    )
    conn.execute(f"UPDATE {table} SET {column} = ? WHERE id = ?", [value, row_id])
    planted.rows[name] = (table, row_id)


def _plant_numbers(ledger: Path, planted: Planted, traces: list[str]) -> None:
    conn = sqlite3.connect(ledger)
    conn.execute("PRAGMA ignore_check_constraints = ON")  # Capsem may write what the DDL forbids
    durations, nan, instant, cost, secs = traces[:5]
    planted.traces.update(durations=durations, nan=nan, instant=instant, cost=cost, secs=secs)
    with conn:
        _plant(conn, planted, "huge_tool_duration", "tool_calls", durations, "duration_ms", 1e300)
        _plant(
            conn, planted, "infinite_net_duration", "net_events", durations, "duration_ms", INFINITY
        )
        _plant(conn, planted, "nan_model_duration", "model_calls", nan, "duration_ms", "NaN")
        _plant(conn, planted, "minus_inf_tool_duration", "tool_calls", nan, "duration_ms", "-inf")
        _plant(
            conn,
            planted,
            "last_instant",
            "model_calls",
            instant,
            "timestamp",
            LAST_INSTANT,
            where="AND duration_ms > 0",
        )
        _plant(conn, planted, "infinite_cost", "model_calls", cost, "estimated_cost_usd", INFINITY)
        conn.execute(
            "UPDATE model_calls SET input_tokens = ? WHERE id = ?",
            [INFINITY, planted.rows["infinite_cost"][1]],
        )
        _plant(
            conn,
            planted,
            "infinite_security_time",
            "security_rule_events",
            secs,
            "timestamp_unix_ms",
            INFINITY,
        )
        _plant(
            conn,
            planted,
            "huge_security_time",
            "security_rule_events",
            secs,
            "timestamp_unix_ms",
            1e300,
            where="AND timestamp_unix_ms < 1e300",
        )
        _plant(
            conn, planted, "minus_inf_cost", "model_calls", secs, "estimated_cost_usd", -INFINITY
        )
    conn.close()


# (plant, how the body and hash are rewritten, the verdict both sides must give)
# Capsem's writer hashes the ORIGINAL captured bytes and stores at most 10 MiB of them
# (writer.rs insert_event_body_blob; spec §4.4): a truncated blob cannot be verified from the
# ledger, whatever its hash says, and is never a mismatch.
BLOB_PLANTS = (
    ("truncated_hash_of_original", "unverifiable"),
    ("truncated_hash_of_stored", "unverifiable"),
    ("upper_case_hex", "verified"),
    ("plain_mismatch", "mismatch"),
    ("text_body", "verified"),
    ("empty_body_empty_hash", "verified"),
    ("upper_case_prefix", "mismatch"),
)


def _ref(data: bytes) -> str:
    return "blake3:" + blake3.blake3(data).hexdigest()


def _plant_blobs(ledger: Path, planted: Planted, trace: str) -> None:
    conn = sqlite3.connect(ledger)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    blobs = conn.execute(
        "SELECT id, event_id, body FROM event_body_blobs WHERE trace_id = ? ORDER BY id", [trace]
    ).fetchall()
    assert len(blobs) >= len(BLOB_PLANTS)
    with conn:
        for (name, _), (blob_id, event_id, body) in zip(
            BLOB_PLANTS, blobs[: len(BLOB_PLANTS)], strict=True
        ):
            planted.blobs[name] = blob_id
            planted.blob_events[blob_id] = event_id
            body = bytes(body)
            if name.startswith("truncated"):
                cut = body[: len(body) // 2]
                digest = _ref(body if name == "truncated_hash_of_original" else cut)
                conn.execute(
                    "UPDATE event_body_blobs SET body = ?, stored_bytes = ?, original_bytes = ?,"
                    " truncated = 1, body_hash = ? WHERE id = ?",
                    [cut, len(cut), len(body), digest, blob_id],
                )
            elif name == "upper_case_hex":
                digest = "blake3:" + blake3.blake3(body).hexdigest().upper()
                conn.execute(
                    "UPDATE event_body_blobs SET body_hash = ? WHERE id = ?", [digest, blob_id]
                )
            elif name == "plain_mismatch":
                conn.execute(
                    "UPDATE event_body_blobs SET body_hash = ? WHERE id = ?",
                    [_ref(body + b"!"), blob_id],
                )
            elif name == "text_body":
                conn.execute(
                    "UPDATE event_body_blobs SET body = CAST(body AS TEXT) WHERE id = ?", [blob_id]
                )
            elif name == "empty_body_empty_hash":  # body is NOT NULL in every era's DDL
                conn.execute(
                    "UPDATE event_body_blobs SET body = x'', stored_bytes = 0, original_bytes = 0,"
                    " body_hash = ? WHERE id = ?",
                    [_ref(b""), blob_id],
                )
            elif name == "upper_case_prefix":
                conn.execute(
                    "UPDATE event_body_blobs SET body_hash = ? WHERE id = ?",
                    ["BLAKE3:" + blake3.blake3(body).hexdigest(), blob_id],
                )
        assert (
            _first(
                conn,
                "SELECT typeof(body) FROM event_body_blobs WHERE id = ?",
                [planted.blobs["text_body"]],
            )
            == "text"
        )
    conn.close()


@pytest.fixture(scope="module")
def planted(clean_home, tmp_path_factory) -> Planted:
    """A private copy of the clean generated home with the odd values planted."""
    home = tmp_path_factory.mktemp("odd-values") / "home"
    shutil.copytree(clean_home[0], home, symlinks=True)
    manifest = clean_home[1]
    stopped = sessions_in(manifest, era="head", has=("clean", "traces"), lacks=("live",))
    number_session = next(s for s in stopped if len(s["traces"]) >= 5)
    blob_session = next(s for s in stopped if s["id"] != number_session["id"])
    result = Planted(
        home=home, session=number_session["id"], ledger=home / number_session["ledger"]
    )
    _plant_numbers(home / number_session["ledger"], result, number_session["traces"])
    result.blob_session, result.blob_trace = blob_session["id"], blob_session["traces"][0]
    _plant_blobs(home / blob_session["ledger"], result, result.blob_trace)
    return result


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def datasette(planted, tmp_path_factory):
    return await make_datasette(
        planted.home, tmp_path_factory.mktemp("odd-values-cache"), index_refresh_seconds=0
    )


async def get_strict(datasette, url: str) -> Any:
    response = await datasette.client.get(url)
    assert response.status_code == 200, (url, response.text[:500])
    return strict_json(response.text)


async def trace_documents(datasette, planted: Planted, group: str) -> dict[str, Any]:
    """HTML status checked; the .json, graph.json and .otlp.json forms, strictly parsed."""
    trace = planted.traces[group]
    html = await datasette.client.get(trace_url(planted.session, trace))
    assert html.status_code == 200, (group, html.text[:500])
    return {
        "json": await get_strict(datasette, trace_url(planted.session, trace, ".json")),
        "graph": await get_strict(datasette, trace_url(planted.session, trace, "/graph.json")),
        "otlp": await get_strict(datasette, trace_url(planted.session, trace, ".otlp.json")),
    }


def bar_of(waterfall: dict, table: str, row_id: int) -> dict:
    return next(b for b in waterfall["rows"] if (b["table"], b["row_id"]) == (table, row_id))


def node_of(graph: dict, table: str, row_id: int) -> dict:
    return next(n for n in graph["nodes"] if n["id"] == f"{table}:{row_id}")


def span_of(otlp: dict, table: str, row_id: int) -> dict:
    spans = [s for rs in otlp["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    return next(
        s
        for s in spans
        if {"key": "capsem.row_id", "value": {"intValue": str(row_id)}} in s["attributes"]
        and _attrs(s).get("capsem.table") == table
    )


def _attrs(span: dict) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values()), None) for a in span["attributes"]}


def assert_sane_times(docs: dict[str, Any]) -> None:
    waterfall = docs["json"]["waterfall"]
    assert iso_or_none(waterfall["start"]) and iso_or_none(waterfall["end"])
    for bar in waterfall["rows"]:
        assert iso_or_none(bar["start"]), bar
        assert math.isfinite(bar["duration_ms"]) and 0 <= bar["duration_ms"] <= 1e15, bar
    for rs in docs["otlp"]["resourceSpans"]:
        for span in rs["scopeSpans"][0]["spans"]:
            start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
            assert 0 <= start <= end, span["name"]
            for event in span.get("events", []):
                assert 0 <= int(event["timeUnixNano"]) < YEAR_10000_NS


# -- unit: the guards ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["NaN", "nan", "inf", "-Infinity", 1e300, -1e300, INFINITY, float("nan"), 10**400, "1e999"],
)
async def test_as_float_refuses_unusable_numbers(value):
    assert as_float(value) is None
    assert parse_ms(value) is None and parse_ns(value) is None


async def test_as_float_keeps_ordinary_numbers():
    assert as_float(" 12.5 ") == 12.5 and as_float(3) == 3.0 and as_float(0) == 0.0
    assert as_float(1718000000123.456) == 1718000000123.456  # an epoch in ms
    assert as_float(True) is None and as_float(None) is None and as_float(b"1") is None


@pytest.mark.parametrize("millis", [1e300, INFINITY, -INFINITY, float("nan"), 253402300800000.0])
async def test_iso_from_ms_answers_none_outside_years_1_to_9999(millis):
    assert iso_from_ms(millis) is None


async def test_the_last_instant_still_parses():
    assert parse_ns(LAST_INSTANT) == YEAR_10000_NS - 1000
    assert iso_from_ms(parse_ms("2026-06-15T10:00:00.5Z")) == "2026-06-15T10:00:00.500000Z"


async def test_json_dumps_never_writes_nan_or_infinity():
    data = {"a": [float("nan"), INFINITY, -INFINITY, 1.5], "b": {"c": (INFINITY,)}, "d": "NaN"}
    assert strict_json(json_dumps(data)) == {
        "a": [None, None, None, 1.5],
        "b": {"c": [None]},
        "d": "NaN",
    }


# -- pages over planted numbers ----------------------------------------------------------------


async def test_huge_and_infinite_durations(datasette, planted):
    docs = await trace_documents(datasette, planted, "durations")
    assert_sane_times(docs)
    for plant in ("huge_tool_duration", "infinite_net_duration"):
        table, row_id = planted.rows[plant]
        assert bar_of(docs["json"]["waterfall"], table, row_id)["duration_ms"] == 0.0
        assert node_of(docs["graph"], table, row_id)["duration_ms"] is None
    table, row_id = planted.rows["infinite_net_duration"]
    span = span_of(docs["otlp"], table, row_id)
    assert span["startTimeUnixNano"] == span["endTimeUnixNano"] != "0"


async def test_nan_durations(datasette, planted):
    docs = await trace_documents(datasette, planted, "nan")
    assert_sane_times(docs)
    for plant in ("nan_model_duration", "minus_inf_tool_duration"):
        table, row_id = planted.rows[plant]
        assert bar_of(docs["json"]["waterfall"], table, row_id)["duration_ms"] == 0.0
        assert node_of(docs["graph"], table, row_id)["duration_ms"] is None
    span = span_of(docs["otlp"], *planted.rows["nan_model_duration"])
    assert span["startTimeUnixNano"] == span["endTimeUnixNano"] != "0"


async def test_a_timestamp_at_the_end_of_year_9999(datasette, planted):
    docs = await trace_documents(datasette, planted, "instant")
    assert_sane_times(docs)
    table, row_id = planted.rows["last_instant"]
    waterfall = docs["json"]["waterfall"]
    assert waterfall["end"] is None  # start + duration is past year 9999: no date to show
    assert waterfall["start"] is not None
    assert bar_of(waterfall, table, row_id)["start_ms"] is not None
    span = span_of(docs["otlp"], table, row_id)
    assert span["startTimeUnixNano"] == str(parse_ns(LAST_INSTANT))


async def test_infinite_cost_and_tokens(datasette, planted):
    docs = await trace_documents(datasette, planted, "cost")
    assert_sane_times(docs)
    table, row_id = planted.rows["infinite_cost"]
    assert node_of(docs["graph"], table, row_id)["cost"] is None
    assert math.isfinite(docs["json"]["trace"]["cost_usd"])
    attrs = _attrs(span_of(docs["otlp"], table, row_id))
    assert "llm.cost.total" not in attrs and "capsem.estimated_cost_usd" not in attrs
    assert "gen_ai.usage.input_tokens" not in attrs


async def test_infinite_and_huge_security_times(datasette, planted):
    docs = await trace_documents(datasette, planted, "secs")
    assert_sane_times(docs)
    waterfall = docs["json"]["waterfall"]
    assert waterfall["unplaced"] >= 2
    for plant in ("infinite_security_time", "huge_security_time"):
        bar = bar_of(waterfall, *planted.rows[plant])
        assert bar["start_ms"] is None and bar["start"] is None
    table, row_id = planted.rows["minus_inf_cost"]
    assert node_of(docs["graph"], table, row_id)["cost"] is None


async def test_event_and_session_pages_stay_strict(datasette, planted):
    conn = sqlite3.connect(planted.ledger)
    try:
        for plant, (table, row_id) in planted.rows.items():
            event_id = _first(conn, f"SELECT event_id FROM {table} WHERE id = ?", [row_id])
            html = await datasette.client.get(event_url(planted.session, event_id))
            assert html.status_code == 200, plant
            data = await get_strict(datasette, event_url(planted.session, event_id, ".json"))
            assert any(r["table"] == table and r["row_id"] == row_id for r in data["rows"]) or any(
                r["table"] == table and r["row_id"] == row_id for r in data["security"]
            ), plant
            if plant == "infinite_cost":
                cells = next(r["cells"] for r in data["rows"] if r["row_id"] == row_id)
                assert cells["estimated_cost_usd"] is None and cells["input_tokens"] is None
    finally:
        conn.close()
    html = await datasette.client.get(session_url(planted.session))
    assert html.status_code == 200
    await get_strict(datasette, session_url(planted.session, ".json"))


async def test_the_cli_export_is_strict_too(planted, tmp_path):
    args = ["capsem", "export-otlp", planted.session, "--home", str(planted.home)]
    result = CliRunner().invoke(cli, [*args, "--cache-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert strict_json(result.output)["resourceSpans"]


# -- one hash verdict -------------------------------------------------------------------------


async def test_checks_and_pages_give_the_same_hash_verdict(datasette, planted, tmp_path):
    expected = {planted.blobs[name]: verdict for name, verdict in BLOB_PLANTS}
    mismatched = {blob_id for blob_id, verdict in expected.items() if verdict == "mismatch"}

    # The integrity check (SQL function capsem_body_hash_verdict).
    settings = load_settings({"capsem_home": str(planted.home), "cache_dir": str(tmp_path)})
    session = Catalog(settings).get(planted.blob_session)
    conn = open_readonly(session.ledger_path, tmp_path)
    try:
        report = check_session(conn, session=session, sample_limit=1_000_000)
        rows = conn.execute(
            "SELECT id, CAST(body AS BLOB), body_hash, truncated FROM event_body_blobs WHERE id IN "
            f"({','.join('?' * len(expected))})",
            list(expected),
        ).fetchall()
    finally:
        conn.close()
    finding = next(f for f in report.findings if f.kind == "blob_hash_mismatch")
    assert finding.failed is None and finding.applicable
    assert set(finding.row_ids) == mismatched

    # The shared function itself.
    for blob_id, data, body_hash, truncated in rows:
        assert hash_verdict(data, body_hash, truncated) == expected[blob_id], blob_id

    # The trace graph: each planted blob node carries the verdict; mismatches are findings.
    graph = await get_strict(
        datasette, trace_url(planted.blob_session, planted.blob_trace, "/graph.json")
    )
    for blob_id, verdict in expected.items():
        assert node_of(graph, "event_body_blobs", blob_id)["hash_verdict"] == verdict, blob_id
    flagged = next((f for f in graph["findings"] if f["kind"] == "blob_hash_mismatch"), None)
    assert flagged is not None
    assert set(flagged["nodes"]) == {f"event_body_blobs:{b}" for b in mismatched}

    # The event page and the body page.
    for blob_id, verdict in expected.items():
        event_id = planted.blob_events[blob_id]
        event = await get_strict(datasette, event_url(planted.blob_session, event_id, ".json"))
        shown = next(b for b in event["bodies"] if b["id"] == blob_id)
        assert shown["hash_verdict"] == verdict, blob_id
        body = await get_strict(
            datasette, event_url(planted.blob_session, event_id, f"/bodies/{blob_id}.json")
        )
        assert body["hash_verdict"] == verdict, blob_id
        if verdict == "unverifiable":
            original = body["original_bytes"]
            assert (
                body["hash_note"] == f"unverifiable (the hash covers all {original} original bytes)"
            )

    # The check page says the same.
    check = await get_strict(datasette, f"/-/capsem/sessions/{planted.blob_session}/check.json")
    kinds = {f["kind"] for f in check["findings"] if f["problem"]}
    assert "blob_hash_mismatch" in kinds
