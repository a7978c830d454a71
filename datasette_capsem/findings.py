"""The shared vocabulary of integrity findings.

The generator writes these ids (`ORDER`) into ``manifest.json`` for every defect it injects,
and the check engine reports findings under the same ids, so a test can compare the two
directly. Numbers in comments refer to §6.2 of the Capsem data spec. A kind's title and
severity are read from the check that reports it (`load_kinds`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


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


# The built-in finding kinds, in the order of §6.2 (reports list them so). Each kind's title and
# severity live beside the check that reports it: in its `.json` in `checks/sql/`, or for the
# file checks (`checks/filechecks.py`, no SQL of their own) in `checks/filechecks.json`.
ORDER: tuple[str, ...] = (
    # 1: event ids on primary tables
    "bad_event_id",
    "duplicate_event_id",
    "null_event_id",
    "placeholder_event_id",
    # 2-5: tool call / response links
    "tool_call_parent_missing",
    "orphan_tool_response",
    "tool_response_parent_missing",
    "response_before_call",
    "unpairable_tool_ids",  # 2-3, 6: a provider habit of Capsem's writer (spec §4.3)
    "result_in_another_trace",  # 3, 6: a normal writer path (spec §4.4)
    "tool_call_without_response",  # 6
    "orphan_model_item",  # 7
    "unledgered_mcp_call",  # 8
    # 9-10
    "orphan_body_blob",
    "blob_size_mismatch",
    "blob_hash_mismatch",
    # 11-12
    "dangling_security_event",
    "ask_lifecycle",
    "ask_pending",
    # 13-14
    "ai_traffic_unparsed",
    "model_call_quality",
    "stop_reason_mismatch",
    # 15-16
    "exec_incomplete",
    "audit_exec_missing",
    # 17-19: main.db vs ledger
    "rollup_mismatch",
    "stale_running",
    "unclean_wal",
    # 20-22
    "bad_timestamp",
    "bad_credential_ref",
    "turn_trace_mismatch",
    "legacy_tables",
    "schema_not_ready",
    "capsem_ready_schema",
)

CHECKS_FOLDER = resources.files(__package__).joinpath("checks")


def load_kinds(folder: Traversable | Path = CHECKS_FOLDER) -> dict[str, FindingKind]:
    """Every kind of `ORDER` with the title and severity its check declares, in that order.

    A check document without both, two checks of one kind that disagree, a kind no check
    describes or a described kind missing from `ORDER` raise ValueError naming the file."""
    declared: dict[str, tuple[dict[str, Any], str]] = {}

    def declare(kind: str, entry: dict[str, Any], source: str) -> None:
        missing = [key for key in ("title", "severity") if not entry.get(key)]
        if missing:
            raise ValueError(f"{source}: finding kind {kind!r} lacks {' and '.join(missing)}")
        Severity(entry["severity"])  # ValueError on an unknown severity
        if kind not in ORDER:
            raise ValueError(f"{source}: finding kind {kind!r} is not in findings.ORDER")
        shown = {"title": entry["title"], "severity": entry["severity"]}
        earlier = declared.setdefault(kind, (shown, source))
        if earlier[0] != shown:
            raise ValueError(f"{source} and {earlier[1]} disagree on finding kind {kind!r}")

    sql = folder.joinpath("sql")
    for item in sorted(sql.iterdir(), key=lambda item: item.name):
        if item.name.endswith(".json"):
            document = json.loads(item.read_text("utf-8"))
            declare(document.get("kind") or item.name.removesuffix(".json"), document, item.name)
    for kind, entry in json.loads(folder.joinpath("filechecks.json").read_text("utf-8")).items():
        declare(kind, entry, "filechecks.json")
    undescribed = [kind for kind in ORDER if kind not in declared]
    if undescribed:
        raise ValueError(f"no check declares the title and severity of {', '.join(undescribed)}")
    return {
        kind: FindingKind(kind, Severity(declared[kind][0]["severity"]), declared[kind][0]["title"])
        for kind in ORDER
    }


KINDS: dict[str, FindingKind] = load_kinds()

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
