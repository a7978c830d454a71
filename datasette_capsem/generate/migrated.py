"""The migrated persistent ledger: rows a 1.2 writer left, then rows the current writer added
after migrate() upgraded the file (spec §4.5). Its findings come with the era."""

from __future__ import annotations

import random
from datetime import timedelta

from datasette_capsem.generate.content import Builder, SessionShape, build_session, dumps
from datasette_capsem.generate.defects import Entry
from datasette_capsem.generate.plan import SessionSpec

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
        rng, "v1_2", spec.start, SessionShape(traces=2, calls=2, providers=spec.shape.providers)
    )
    entries: list[Entry] = []
    for table in EVENT_ID_TABLES:
        for row in old.ledger.rows[table]:
            row["event_id"] = None
            entries.append(("null_event_id", table, row["id"]))
    for row in old.ledger.rows["tool_calls"]:
        row["event_id"] = "000000000000"
        row["timestamp"] = ""  # the 06-22 column default: unparseable by julianday()
        row["transport"] = "unknown"
        entries.append(("placeholder_event_id", "tool_calls", row["id"]))
        entries.append(("bad_timestamp", "tool_calls", row["id"]))
    for row in old.ledger.rows["mcp_calls"]:
        row["event_id"] = None
    _leftovers(old)
    old_net_rows = len(old.ledger.rows["net_events"])
    new = build_session(rng, "current", old.t + timedelta(days=60), spec.shape, ledger=old.ledger)
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
        row["credential_ref"] = "credential:sha256:" + "ab" * 16
        entries.append(("bad_credential_ref", "net_events", row["id"]))
    return new, entries


def _leftovers(b: Builder) -> None:
    """Rows in the 1.2 tables Capsem later dropped from its DDL but never from files."""
    ledger = b.ledger
    ledger.add(
        "session_identity", vm_id="code-vm1", profile_id="code", user_id="local", created_at=b.ts()
    )
    for call in ledger.rows["model_calls"]:
        iid = ledger.add(
            "ai_model_interactions",
            timestamp=call["timestamp"],
            provider=call["provider"],
            model=call["model"],
            request_id=call["message_id"],
            trace_id=call["trace_id"],
            status="complete",
            duration_ms=call["duration_ms"],
        )
        ledger.add(
            "ai_content_blocks",
            interaction_id=iid,
            role="assistant",
            block_index=0,
            block_type="text",
            content=call["text_content"],
        )
        ledger.add(
            "ai_usage_details", interaction_id=iid, key="input_tokens", value=call["input_tokens"]
        )
    for call in ledger.rows["tool_calls"]:
        ledger.add(
            "ai_model_tool_calls",
            interaction_id=call["model_call_id"],
            call_id=call["call_id"],
            tool_name=call["tool_name"],
            arguments=call["arguments"],
        )
    for resp in ledger.rows["tool_responses"]:
        ledger.add(
            "ai_model_tool_results",
            interaction_id=resp["model_call_id"],
            call_id=resp["call_id"],
            content=resp["content_preview"],
            is_error=0,
        )
    for mcp in ledger.rows["mcp_calls"]:
        ledger.add(
            "ai_mcp_execution_evidence",
            interaction_id=None,
            mcp_call_id=mcp["id"],
            server_name=mcp["server_name"],
            tool_name=mcp["tool_name"],
            evidence_json=dumps({"decision": mcp["decision"]}),
        )
    sid = ledger.add(
        "security_events",
        timestamp=b.ts(),
        event_type="http.request",
        subject="api.anthropic.com",
        trace_id=b.ambient,
        payload_json=dumps({"decision": "allow"}),
    )
    ledger.add(
        "security_event_steps",
        security_event_id=sid,
        step_index=0,
        stage="rule",
        decision="allow",
        detail_json=dumps({"rule": "net.allow.ai"}),
    )
    ledger.add(
        "security_event_links", security_event_id=sid, target_table="net_events", target_id=1
    )
    fid = ledger.add(
        "detection_findings",
        timestamp=b.ts(),
        security_event_id=sid,
        rule_id="detect.curl-pipe-sh",
        level="low",
        summary="curl piped to sh",
    )
    ledger.add("detection_finding_tags", finding_id=fid, tag="process")
