"""Row-level defects (spec §6.2), injected into a built session before it is written.

Each injector edits or adds rows through the session's ``Builder`` and returns one
``(kind, table, row_id)`` per offending row, including every second finding a change causes
as a side effect, so the manifest matches what an exact checker reports. Injectors pick rows
no other row depends on wherever they can, to keep side effects out.
"""

from __future__ import annotations

from collections.abc import Callable

from datasette_capsem.generate.content import Builder, blake3_ref, hex_id, new_uuid

Entry = tuple[str, str | None, int | None]


def _traces(b: Builder) -> list[list[dict]]:
    """Model calls grouped by trace, in id order."""
    groups: dict[str, list[dict]] = {}
    for row in b.ledger.rows["model_calls"]:
        groups.setdefault(row["trace_id"], []).append(row)
    return list(groups.values())


def _response_pair(b: Builder) -> tuple[dict, dict]:
    """A tool response and the tool call it answers."""
    tr = b.ledger.rows["tool_responses"][0]
    tc = b.ledger.where("tool_calls", call_id=tr["call_id"], trace_id=tr["trace_id"])[0]
    return tr, tc


def _max_id(b: Builder, table: str) -> int:
    return b.ledger.next_id(table) - 1


def duplicate_event_id(b: Builder) -> list[Entry]:
    first, second = b.ledger.rows["fs_events"][:2]
    second["event_id"] = first["event_id"]
    return [
        ("duplicate_event_id", "fs_events", first["id"]),
        ("duplicate_event_id", "fs_events", second["id"]),
    ]


def tool_call_parent_missing(b: Builder) -> list[Entry]:
    """A tool call whose model call (id 0) never existed; its response keeps the rest clean."""
    last = _traces(b)[0][-1]
    call_id = "toolu_01" + hex_id(b.rng, 20)
    rid = b.ledger.add(
        "tool_calls",
        event_id=hex_id(b.rng),
        timestamp=last["timestamp"],
        model_call_id=0,
        provider=last["provider"],
        status="observed",
        call_index=0,
        call_id=call_id,
        tool_name="Read",
        arguments='{"file_path":"src/lost.py"}',
        origin="native",
        transport="sse",
        server_name="model",
        decision="allowed",
        trace_id=last["trace_id"],
        turn_id=last["trace_id"],
    )
    b.ledger.add(
        "tool_responses",
        model_call_id=last["id"],
        call_id=call_id,
        content_preview="(file)",
        is_error=0,
        trace_id=last["trace_id"],
        turn_id=last["trace_id"],
    )
    return [("tool_call_parent_missing", "tool_calls", rid)]


def orphan_tool_response(b: Builder) -> list[Entry]:
    """A result for a call nobody made, with an id the provider's writer really produces
    (Gemini: a synthesized id no call of the trace has; in an Ollama call, an id that is not
    ollama_tool_result_<n>, so the habit of unpairable Ollama ids cannot explain it)."""
    last = _traces(b)[0][-1]
    call_id = {
        "google": "gemini_list_directory_7",
        "ollama": "call_" + hex_id(b.rng, 20),
    }.get(last["provider"], "toolu_01" + hex_id(b.rng, 20))
    rid = b.ledger.add(
        "tool_responses",
        model_call_id=last["id"],
        call_id=call_id,
        content_preview="result for a call nobody made",
        is_error=0,
        trace_id=last["trace_id"],
        turn_id=last["trace_id"],
    )
    return [("orphan_tool_response", "tool_responses", rid)]


def tool_response_parent_missing(b: Builder) -> list[Entry]:
    tr, _tc = _response_pair(b)
    rid = b.ledger.add(
        "tool_responses",
        model_call_id=_max_id(b, "model_calls") + 100,
        call_id=tr["call_id"],
        content_preview="retried result",
        is_error=0,
        trace_id=tr["trace_id"],
        turn_id=tr["trace_id"],
    )
    return [("tool_response_parent_missing", "tool_responses", rid)]


def response_before_call(b: Builder) -> list[Entry]:
    tr, tc = _response_pair(b)
    tr["model_call_id"] = tc["model_call_id"]
    return [("response_before_call", "tool_responses", tr["id"])]


def tool_call_without_response(b: Builder) -> list[Entry]:
    """Listed from the rows: the session was built with an interrupted last trace."""
    answered = {(r["call_id"], r["trace_id"]) for r in b.ledger.rows["tool_responses"]}
    return [
        ("tool_call_without_response", "tool_calls", r["id"])
        for r in b.ledger.rows["tool_calls"]
        if r["origin"] in ("native", "local", "mcp_proxy")
        and (r["call_id"], r["trace_id"]) not in answered
    ]


def orphan_model_item(b: Builder) -> list[Entry]:
    mc = b.ledger.rows["model_calls"][0]
    content = "response whose model call was lost"
    rid = b.ledger.add(
        "model_items",
        event_id=hex_id(b.rng),
        model_call_id=_max_id(b, "model_calls") + 50,
        timestamp=mc["timestamp"],
        provider=mc["provider"],
        model=mc["model"],
        path=mc["path"],
        trace_id=mc["trace_id"],
        turn_id=mc["trace_id"],
        kind="response",
        item_index=1,
        call_id="",
        content=content,
        content_hash=blake3_ref(content),
    )
    return [("orphan_model_item", "model_items", rid)]


def unledgered_mcp_call(b: Builder) -> list[Entry]:
    """An mcp.tool_call rule row with no tool call: also a dangling security row (rule 11)."""
    rid = b.rule("mcp.tool_call", hex_id(b.rng), rule_id="mcp.allow.github", trace_id=b.ambient)
    return [
        ("unledgered_mcp_call", "security_rule_events", rid),
        ("dangling_security_event", "security_rule_events", rid),
    ]


def orphan_body_blob(b: Builder) -> list[Entry]:
    b.blob("net_events", "http.request", hex_id(b.rng), "request", b'{"orphan":true}', b.ambient)
    return [("orphan_body_blob", "event_body_blobs", _max_id(b, "event_body_blobs"))]


def blob_size_mismatch(b: Builder) -> list[Entry]:
    blob = b.ledger.rows["event_body_blobs"][0]
    blob["stored_bytes"] = blob["original_bytes"] = len(blob["body"]) + 7
    return [("blob_size_mismatch", "event_body_blobs", blob["id"])]


def blob_hash_mismatch(b: Builder) -> list[Entry]:
    blob = b.ledger.rows["event_body_blobs"][1]
    blob["body_hash"] = blake3_ref(blob["body"] + b" ")
    return [("blob_hash_mismatch", "event_body_blobs", blob["id"])]


def dangling_security_event(b: Builder) -> list[Entry]:
    rid = b.rule("dns.query", hex_id(b.rng), trace_id=b.ambient, summary="lost.example.com")
    return [("dangling_security_event", "security_rule_events", rid)]


def _unasked_exec(b: Builder) -> dict:
    asked = {r["event_id"] for r in b.ledger.rows["security_ask_events"]}
    return next(r for r in b.ledger.rows["exec_events"] if r["event_id"] not in asked)


def ask_lifecycle(b: Builder) -> list[Entry]:
    """An ask answered without ever having been pending."""
    exec_row = _unasked_exec(b)
    b.rule("process.exec", exec_row["event_id"], "ask", rule_id="exec.ask.network-tools")
    rid = b.ask_row(hex_id(b.rng), exec_row["event_id"], "approved")
    return [("ask_lifecycle", "security_ask_events", rid)]


def ask_pending(b: Builder) -> list[Entry]:
    exec_row = _unasked_exec(b)
    b.rule("process.exec", exec_row["event_id"], "ask", rule_id="exec.ask.network-tools")
    rid = b.ask_row(hex_id(b.rng), exec_row["event_id"], "pending")
    return [("ask_pending", "security_ask_events", rid)]


def ai_traffic_unparsed(b: Builder) -> list[Entry]:
    """Provider traffic whose stream was never parsed: AI net rows, no model calls at all."""
    assert not b.ledger.rows["model_calls"], "build this session with traces=0"
    entries = []
    for _ in range(2):
        rid, _eid = b.net(
            "api.anthropic.com",
            "/v1/messages",
            "allowed",
            200,
            method="POST",
            trace=new_uuid(b.rng),
            request='{"model":"claude-sonnet-4-5"}',
            response="event: message_start\ndata: {truncated",
            ai=True,
        )
        entries.append(("ai_traffic_unparsed", "net_events", rid))
        b.tick(500, 4000)
    return entries


def model_call_quality(b: Builder) -> list[Entry]:
    """Four calls, one problem each: no model, no tokens, no request body, unpriced model."""
    calls = [
        c
        for c in b.ledger.rows["model_calls"]
        if c["provider"] in ("anthropic", "openai", "google")
    ][:4]
    no_model, no_tokens, no_body, unpriced = calls
    no_model["model"] = None
    no_model["estimated_cost_usd"] = 0.0
    no_tokens["input_tokens"] = no_tokens["output_tokens"] = None
    no_tokens["estimated_cost_usd"] = 0.0
    no_body["request_body_preview"] = None
    unpriced["model"] = "claude-experimental-0826"
    unpriced["estimated_cost_usd"] = 0.0
    for item in b.ledger.rows["model_items"]:
        if item["model_call_id"] in (no_model["id"], unpriced["id"]):
            item["model"] = b.ledger.get("model_calls", item["model_call_id"])["model"]
    return [("model_call_quality", "model_calls", c["id"]) for c in calls]


def stop_reason_mismatch(b: Builder) -> list[Entry]:
    final = _traces(b)[0][-1]
    final["stop_reason"] = "tool_use"
    return [("stop_reason_mismatch", "model_calls", final["id"])]


def exec_incomplete(b: Builder) -> list[Entry]:
    row = b.ledger.rows["exec_events"][-1]
    row.update(
        exit_code=None,
        duration_ms=None,
        stdout_preview=None,
        stderr_preview=None,
        stdout_bytes=0,
        stderr_bytes=0,
    )
    return [("exec_incomplete", "exec_events", row["id"])]


def audit_exec_missing(b: Builder) -> list[Entry]:
    row = next(r for r in b.ledger.rows["audit_events"] if r["exec_event_id"] is not None)
    row["exec_event_id"] = _max_id(b, "exec_events") + 1000
    return [("audit_exec_missing", "audit_events", row["id"])]


def bad_timestamp(b: Builder) -> list[Entry]:
    row = b.ledger.rows["fs_events"][0]
    row["timestamp"] = "Tue Aug 4 10:12:33 UTC 2026"
    return [("bad_timestamp", "fs_events", row["id"])]


def turn_trace_mismatch(b: Builder) -> list[Entry]:
    row = b.ledger.rows["dns_events"][0]
    row["turn_id"] = new_uuid(b.rng)
    return [("turn_trace_mismatch", "dns_events", row["id"])]


# Kinds injected into a current-era session, one dedicated session each.
ROW_INJECTORS: dict[str, Callable[[Builder], list[Entry]]] = {
    "duplicate_event_id": duplicate_event_id,
    "tool_call_parent_missing": tool_call_parent_missing,
    "orphan_tool_response": orphan_tool_response,
    "tool_response_parent_missing": tool_response_parent_missing,
    "response_before_call": response_before_call,
    "orphan_model_item": orphan_model_item,
    "unledgered_mcp_call": unledgered_mcp_call,
    "orphan_body_blob": orphan_body_blob,
    "blob_size_mismatch": blob_size_mismatch,
    "blob_hash_mismatch": blob_hash_mismatch,
    "dangling_security_event": dangling_security_event,
    "ask_lifecycle": ask_lifecycle,
    "ask_pending": ask_pending,
    "ai_traffic_unparsed": ai_traffic_unparsed,
    "model_call_quality": model_call_quality,
    "stop_reason_mismatch": stop_reason_mismatch,
    "exec_incomplete": exec_incomplete,
    "audit_exec_missing": audit_exec_missing,
    "bad_timestamp": bad_timestamp,
    "turn_trace_mismatch": turn_trace_mismatch,
}

# Kinds that come from the file, its place on disk or main.db rather than from rows.
FILE_KINDS = ("schema_not_ready", "unclean_wal", "rollup_mismatch", "stale_running")
# Kinds that come with a session's era (see migrated.py) or its interrupted shape.
ERA_KINDS = (
    "legacy_tables",
    "null_event_id",
    "placeholder_event_id",
    "bad_event_id",
    "bad_credential_ref",
    "tool_call_without_response",
)
