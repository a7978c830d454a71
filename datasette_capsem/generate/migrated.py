"""The migrated persistent ledger: rows a 1.2 writer left, then rows the current writer added
after migrate() upgraded the file (spec §4.5). Its findings come with the era."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from datasette_capsem.generate.content import Builder, SessionShape, build_session, hex_id
from datasette_capsem.generate.defects import Entry
from datasette_capsem.generate.plan import SessionSpec
from datasette_capsem.ledger import eras

EVENT_ID_TABLES = (
    "net_events",
    "model_calls",
    "fs_events",
    "exec_events",
    "dns_events",
    "audit_events",
)


def build(rng: random.Random, spec: SessionSpec) -> tuple[Builder, list[Entry]]:
    """Old rows (NULL event ids, placeholder tool-call ids, no turn ids) then new rows."""
    old = build_session(
        rng,
        eras.V1_2.name,
        spec.start,
        SessionShape(traces=2, calls=2, providers=spec.shape.providers),
    )
    # migrate() drops snapshot_events (06-11) with its rows.
    old.ledger.rows.pop("snapshot_events", None)
    entries: list[Entry] = []
    for table in EVENT_ID_TABLES:
        for row in old.ledger.rows[table]:
            row["event_id"] = None
            entries.append(("null_event_id", table, row["id"]))
    for row in old.ledger.rows["tool_calls"]:
        # The 1.3 rebuild of tool_calls (model_call_id was NOT NULL): placeholder event id,
        # the new columns' defaults, transport backfilled from origin.
        row["event_id"] = "000000000000"
        row["timestamp"] = ""  # the column default: unparseable by julianday()
        row["provider"] = ""
        row["transport"] = {"mcp": "vsock_frame", "local": "direct"}.get(row["origin"], "unknown")
        entries.append(("placeholder_event_id", "tool_calls", row["id"]))
        entries.append(("bad_timestamp", "tool_calls", row["id"]))
    _leftovers(old, spec)
    old_net_rows = len(old.ledger.rows["net_events"])
    new = build_session(
        rng, eras.HEAD.name, head_start(spec), spec.shape, ledger=old.ledger, ambient=old.ambient
    )
    if "bad_event_id" in spec.defects:
        row = new.ledger.rows["fs_events"][-1]
        row["event_id"] = row["event_id"][:6]
        entries.append(("bad_event_id", "fs_events", row["id"]))
    if "bad_credential_ref" in spec.defects:
        row = next(
            r
            for r in new.ledger.rows["net_events"]
            if r["credential_ref"] is None and r["id"] > old_net_rows
        )
        # Every credential_ref column carries its CHECK, so only a write that bypassed it (a
        # damaged or hand-edited file) holds this: applied with ignore_check_constraints. A
        # read-only integrity_check (how readers open ledgers) does not verify CHECKs, so the
        # file still reads as ready.
        new.forced.append(
            ("net_events", "credential_ref", "credential:sha256:" + "ab" * 16, row["id"])
        )
        entries.append(("bad_credential_ref", "net_events", row["id"]))
    new.absorb(old)
    return new, entries


def head_start(spec: SessionSpec) -> datetime:
    """When the HEAD writer reopened the VM (and the service gave it its main.db row)."""
    return spec.start + timedelta(days=61)


def _leftovers(b: Builder, spec: SessionSpec) -> None:
    """Rows in the 1.2 tables Capsem later dropped from its DDL but never from files."""
    ledger = b.ledger
    ledger.rows["session_identity"].append(
        {
            "id": 1,
            "updated_at": b.ts(),
            "vm_id": spec.name or spec.id,
            "profile_id": "code",
            "user_id": "local",
        }
    )
    families = {
        "anthropic": ("anthropic", "anthropic_messages"),
        "openai": ("openai", "openai_responses"),
        "google": ("google_gemini", "google_gemini_content"),
    }
    interactions: dict[int, int] = {}
    for call in ledger.rows["model_calls"]:
        provider, family = families.get(call["provider"], ("unknown", "unknown"))
        iid = ledger.add(
            "ai_model_interactions",
            model_call_id=call["id"],
            interaction_id=hex_id(b.rng, 32),
            trace_id=call["trace_id"],
            attribution_scope="vm",
            source_engine="network",
            origin_kind="guest_network",
            vm_id=spec.name or spec.id,
            provider=provider,
            api_family=family,
            model=call["model"],
            parse_status="complete",
            evidence_status="complete",
            request_id=call["message_id"] or hex_id(b.rng),
            request_model=call["model"],
            request_stream=call["stream"],
            request_message_count=call["messages_count"],
            request_tools_declared_count=call["tools_count"],
            request_raw_shape_version="1",
            response_stop_reason=call["stop_reason"],
            response_text_preview=call["text_content"],
            usage_input_tokens=call["input_tokens"],
            usage_output_tokens=call["output_tokens"],
            usage_estimated_cost_micros=round((call["estimated_cost_usd"] or 0) * 1e6),
        )
        interactions[call["id"]] = iid
        ledger.add(
            "ai_content_blocks",
            interaction_id=iid,
            block_index=0,
            kind="text",
            text_preview=call["text_content"],
        )
        ledger.add(
            "ai_usage_details",
            interaction_id=iid,
            scope="response",
            name="input_tokens",
            value=call["input_tokens"],
        )
    for call in ledger.rows["tool_calls"]:
        if call["model_call_id"] not in interactions:
            continue
        ledger.add(
            "ai_model_tool_calls",
            interaction_id=interactions[call["model_call_id"]],
            tool_call_id=call["call_id"],
            call_index=call["call_index"],
            provider_call_id=call["call_id"],
            raw_name=call["tool_name"],
            normalized_name=call["tool_name"],
            arguments_raw=call["arguments"],
            arguments_status="valid_json",
            origin="local_builtin_tool" if call["origin"] == "local" else "native_provider_tool",
            status="proposed",
            parse_confidence="high",
        )
    for resp in ledger.rows["tool_responses"]:
        ledger.add(
            "ai_model_tool_results",
            interaction_id=interactions[resp["model_call_id"]],
            tool_call_id=resp["call_id"],
            content_kind="text",
            content_preview=resp["content_preview"],
            result_status="returned_to_model",
            returned_to_model=1,
            parse_confidence="high",
        )
    for mcp in ledger.rows["mcp_calls"]:
        ledger.add(
            "ai_mcp_execution_evidence",
            mcp_call_id=str(mcp["id"]),
            server_id=mcp["server_name"],
            tool_name=mcp["tool_name"],
            namespaced_tool_name=f"{mcp['server_name']}__{mcp['tool_name']}",
            transport="vsock_frame",
            request_arguments_raw=mcp["request_preview"],
            result_kind="text",
            result_preview=mcp["response_preview"],
            latency_ms=mcp["duration_ms"],
            link_status="not_applicable",
        )
    journal_id = hex_id(b.rng, 32)
    ledger.add(
        "security_events",
        event_id=journal_id,
        timestamp=b.ts(),
        timestamp_unix_ms=b.ms(),
        event_family="http",
        event_type="http.request",
        source_engine="network",
        final_action="continue",
        enforceability="inline_blockable",
        attribution_scope="vm",
        origin_kind="guest_network",
        trace_id=b.ambient,
        vm_id=spec.name or spec.id,
        redaction_state="summary-only",
        finding_count=1,
    )
    ledger.add(
        "security_event_steps",
        event_id=journal_id,
        step_index=0,
        kind="enforcement_match",
        status="matched",
        rule_id="net.allow.ai",
    )
    ledger.add(
        "security_event_links",
        event_id=journal_id,
        linked_event_id="net_events:1",
        link_type="ledger_row",
    )
    finding = hex_id(b.rng, 32)
    ledger.add(
        "detection_findings",
        finding_id=finding,
        event_id=journal_id,
        rule_id="detect.curl-pipe-sh",
        pack_id="default",
        title="curl piped to sh",
        severity="low",
        confidence="medium",
    )
    ledger.add("detection_finding_tags", finding_id=finding, tag_index=0, tag="process")
