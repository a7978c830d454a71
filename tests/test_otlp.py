"""OTLP JSON export: its structure is valid OTLP, and its values (gen_ai.* and OpenInference
attributes, times, parents, security events) match the ledger; the CLI says the same."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem.graph.timeparse import parse_ns
from tests.helpers import sessions_in
from tests.trace_support import clean_current, ledger, trace_url

pytestmark = pytest.mark.asyncio(loop_scope="session")

HEX32, HEX16 = re.compile(r"^[0-9a-f]{32}$"), re.compile(r"^[0-9a-f]{16}$")
VALUE_KEYS = {"stringValue", "intValue", "doubleValue", "boolValue", "arrayValue"}


def attrs(span: dict) -> dict:
    """Attribute list -> {key: python value}."""
    found = {}
    for item in span["attributes"]:
        ((kind, value),) = item["value"].items()
        if kind == "intValue":
            value = int(value)
        elif kind == "arrayValue":
            value = [next(iter(v.values())) for v in value["values"]]
        found[item["key"]] = value
    return found


def spans_of(document: dict) -> list[dict]:
    (resource,) = document["resourceSpans"]
    (scope,) = resource["scopeSpans"]
    assert scope["scope"]["name"] == "datasette-capsem"
    return scope["spans"]


def check_structure(document: dict, trace_id: str) -> dict[str, dict]:
    spans = spans_of(document)
    by_id = {s["spanId"]: s for s in spans}
    assert len(by_id) == len(spans), "span ids are unique"
    roots = [s for s in spans if "parentSpanId" not in s]
    assert len(roots) == 1 and attrs(roots[0])["capsem.trace_id"] == trace_id
    for span in spans:
        assert HEX32.match(span["traceId"]) and HEX16.match(span["spanId"])
        assert span["traceId"] == trace_id.replace("-", "")
        assert span.get("parentSpanId") in (None, *by_id)
        start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
        assert 0 < start <= end
        assert span["kind"] in (1, 3) and span["status"]["code"] in (1, 2)
        for item in span["attributes"]:
            assert set(item["value"]) <= VALUE_KEYS
    return by_id


async def test_export_matches_the_ledger(datasette, manifest, capsem_home, cache_dir):
    session = clean_current(manifest)[0]
    trace = session["traces"][0]
    response = await datasette.client.get(trace_url(session["id"], trace, ".otlp.json"))
    assert response.status_code == 200
    document = response.json()
    by_id = check_structure(document, trace)
    spans = list(by_id.values())
    root = next(s for s in spans if "parentSpanId" not in s)
    llm = [s for s in spans if attrs(s).get("openinference.span.kind") == "LLM"]
    tools = [s for s in spans if attrs(s).get("openinference.span.kind") == "TOOL"]
    with ledger(capsem_home, session, cache_dir) as conn:
        calls = conn.execute("SELECT * FROM model_calls WHERE trace_id = ?", [trace]).fetchall()
        assert len(llm) == len(calls)
        for call in calls:
            span = next(s for s in llm if attrs(s)["capsem.row_id"] == call["id"])
            values = attrs(span)
            assert span["parentSpanId"] == root["spanId"]
            assert values["gen_ai.operation.name"] == "chat"
            assert values["gen_ai.request.model"] == values["llm.model_name"] == call["model"]
            assert values["gen_ai.system"] == values["llm.provider"] == call["provider"]
            assert values["gen_ai.usage.input_tokens"] == call["input_tokens"]
            assert values["llm.token_count.prompt"] == call["input_tokens"]
            assert values["gen_ai.usage.output_tokens"] == call["output_tokens"]
            assert values["llm.token_count.total"] == call["input_tokens"] + call["output_tokens"]
            assert values["gen_ai.response.finish_reasons"] == [call["stop_reason"]]
            assert values["llm.cost.total"] == pytest.approx(call["estimated_cost_usd"])
            assert values["capsem.event_id"] == call["event_id"]
            start_ns = parse_ns(call["timestamp"])
            assert int(span["startTimeUnixNano"]) == start_ns
            assert int(span["endTimeUnixNano"]) == start_ns + call["duration_ms"] * 1_000_000
            rules = conn.execute(
                "SELECT count(*) FROM security_rule_events WHERE event_id = ?", [call["event_id"]]
            ).fetchone()[0]
            names = [e["name"] for e in span.get("events", [])]
            assert names.count("security.rule") == rules
        emitted = conn.execute(
            "SELECT * FROM tool_calls WHERE model_call_id IN "
            "(SELECT id FROM model_calls WHERE trace_id = ?)",
            [trace],
        ).fetchall()
        for tool in emitted:
            span = next(s for s in tools if attrs(s).get("capsem.row_id") == tool["id"])
            values = attrs(span)
            parent = attrs(by_id[span["parentSpanId"]])
            assert parent["capsem.row_id"] == tool["model_call_id"]
            assert values["gen_ai.tool.name"] == values["tool.name"] == tool["tool_name"]
            assert values["gen_ai.tool.call.id"] == tool["call_id"]
            assert values["input.value"] == tool["arguments"]
        host = [s for s in spans if attrs(s).get("capsem.table") == "net_events"]
        nets = conn.execute(
            "SELECT count(*) FROM net_events WHERE trace_id = ?", [trace]
        ).fetchone()
        assert len(host) == nets[0]
    assert int(root["startTimeUnixNano"]) == min(int(s["startTimeUnixNano"]) for s in spans)
    assert int(root["endTimeUnixNano"]) == max(int(s["endTimeUnixNano"]) for s in spans)
    assert attrs(root)["gen_ai.usage.input_tokens"] == sum(c["input_tokens"] for c in calls)


async def test_the_cli_exports_the_same_spans(datasette, manifest, capsem_home, cache_dir):
    session = clean_current(manifest)[1]
    trace = session["traces"][0]
    runner = CliRunner()
    args = ["capsem", "export-otlp", session["id"], "--home", str(capsem_home)]
    args += ["--cache-dir", str(cache_dir)]
    one = runner.invoke(cli, [*args, "--trace", trace])
    assert one.exit_code == 0, one.output
    from_cli = json.loads(one.output)
    over_http = (await datasette.client.get(trace_url(session["id"], trace, ".otlp.json"))).json()
    assert from_cli == over_http
    every = runner.invoke(cli, args)
    assert every.exit_code == 0
    exported = {
        attrs(s)["capsem.trace_id"]
        for rs in json.loads(every.output)["resourceSpans"]
        for s in rs["scopeSpans"][0]["spans"]
        if "parentSpanId" not in s
    }
    assert exported == set(session["traces"])
    missing = runner.invoke(cli, [*args, "--trace", "no-such-trace"])
    assert missing.exit_code == 3
    unknown = runner.invoke(cli, ["capsem", "export-otlp", "nope", "--home", str(capsem_home)])
    assert unknown.exit_code == 2  # an unknown session: 2 from every command


async def test_older_eras_export_too(datasette, manifest):
    older = sessions_in(
        manifest, has=("traces",), where=lambda s: s.get("era") in ("0.16", "1.1", "migrated")
    )
    assert older
    for session in older:
        trace = session["traces"][0]
        response = await datasette.client.get(trace_url(session["id"], trace, ".otlp.json"))
        assert response.status_code == 200
        spans = spans_of(response.json())
        assert any(attrs(s).get("openinference.span.kind") == "LLM" for s in spans)
