"""The shared vocabulary of integrity findings.

The generator writes these ids into ``manifest.json`` for every defect it injects, and the
check engine reports findings under the same ids, so a test can compare the two directly.
Numbers in comments refer to §6.2 of the Capsem data spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @staticmethod
    def rank(value: str | None) -> int:
        """Sort key, most severe first; an unknown severity (a plugin's) sorts last."""
        return SEVERITY_RANK.get(value or "", len(SEVERITY_RANK))


SEVERITY_RANK = {Severity.ERROR.value: 0, Severity.WARNING.value: 1, Severity.INFO.value: 2}


@dataclass(frozen=True)
class FindingKind:
    id: str
    severity: Severity
    title: str


def _kinds(*kinds: FindingKind) -> dict[str, FindingKind]:
    return {kind.id: kind for kind in kinds}


E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

KINDS: dict[str, FindingKind] = _kinds(
    # 1: event ids on primary tables
    FindingKind("bad_event_id", E, "Event id is not 12 lowercase hex characters"),
    FindingKind("duplicate_event_id", E, "Event id used by more than one row"),
    FindingKind("null_event_id", W, "Rows without an event id (migrated file)"),
    FindingKind(
        "placeholder_event_id", INFO, "Tool calls carrying the migration placeholder event id"
    ),
    # 2-5: tool call / response links
    FindingKind("tool_call_parent_missing", E, "Tool call whose model call does not exist"),
    FindingKind(
        "orphan_tool_response", E, "Tool response with no matching call earlier in the session"
    ),
    FindingKind("tool_response_parent_missing", E, "Tool response whose model call does not exist"),
    FindingKind("response_before_call", E, "Tool response consumed before the call was emitted"),
    # 2-3, 6: a provider habit of Capsem's writer, not a broken ledger (spec §4.3)
    FindingKind(
        "unpairable_tool_ids",
        INFO,
        "Tool calls and results Capsem could not pair for this provider",
    ),
    # 3, 6: a normal writer path (spec §4.4)
    FindingKind(
        "result_in_another_trace",
        INFO,
        "Tool result recorded in another trace than its call (retry, resume, history, ids)",
    ),
    # 6
    FindingKind("tool_call_without_response", W, "Tool call that never got a response"),
    # 7
    FindingKind(
        "orphan_model_item", E, "Model item whose model call, tool call or response is missing"
    ),
    # 8
    FindingKind("unledgered_mcp_call", E, "MCP tool call with no logical tool-call row"),
    # 9-10
    FindingKind("orphan_body_blob", E, "Body blob whose parent row does not exist"),
    FindingKind("blob_size_mismatch", E, "Body blob whose size fields disagree with its bytes"),
    FindingKind("blob_hash_mismatch", E, "Body blob whose blake3 hash does not match its bytes"),
    # 11-12
    FindingKind("dangling_security_event", W, "Security rule event pointing at no ledger row"),
    FindingKind("ask_lifecycle", E, "Security ask with a broken lifecycle"),
    FindingKind("ask_pending", W, "Security ask still pending"),
    # 13-14
    FindingKind("ai_traffic_unparsed", E, "AI provider traffic with no parsed model call"),
    FindingKind("model_call_quality", W, "Model call with missing model, tokens, body or pricing"),
    FindingKind("stop_reason_mismatch", W, "stop_reason disagrees with the tool calls emitted"),
    # 15-16
    FindingKind("exec_incomplete", W, "Exec that never completed on a stopped session"),
    FindingKind("audit_exec_missing", E, "Audit row linked to a missing exec event"),
    # 17-19: main.db vs ledger
    FindingKind("rollup_mismatch", E, "main.db rollup disagrees with the ledger"),
    FindingKind("stale_running", W, "main.db says running but the session is gone or idle"),
    FindingKind("unclean_wal", W, "Non-empty WAL beside a stopped session"),
    # 20-22
    FindingKind("bad_timestamp", W, "Timestamp SQLite cannot parse"),
    FindingKind("bad_credential_ref", W, "credential_ref that is not credential:blake3:<64 hex>"),
    FindingKind("turn_trace_mismatch", W, "turn_id differs from trace_id"),
    FindingKind("legacy_tables", INFO, "Legacy or unexpected tables present"),
    FindingKind(
        "schema_not_ready",
        E,
        "File fails integrity_check or lacks the columns every era has (this project's rule)",
    ),
    FindingKind("capsem_ready_schema", INFO, "Capsem's own ledger routes would refuse this file"),
)

# Problems with a whole file rather than rows in it; the catalog reports these.
BROKEN_FILE_KINDS = (
    "zero_bytes",
    "truncated",
    "not_sqlite",
    "unreadable",  # permission denied
    "registry_invalid",  # persistent_registry.json does not parse
    "wal_without_shm",
)

# Agent-controlled content the generator plants to prove escaping and truncation.
HOSTILE_KINDS = ("html_payload", "huge_cell", "binary_value", "invalid_utf8")
