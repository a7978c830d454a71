"""The generator against the spec: schemas per era, invariants on clean sessions, every
manifest entry present exactly as listed, determinism and CLI validation.

The §6.2 checks here are written independently of the generator (plain SQL over plain
sqlite3), so they are a second opinion on the manifest, not a copy of it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import stat
import time
from collections import Counter
from pathlib import Path

import blake3
import pytest
from click.testing import CliRunner

from datasette_capsem import findings
from datasette_capsem.cli.generate import generate as generate_command
from datasette_capsem.generate import GenerateOptions, generate_home
from datasette_capsem.generate.live import LiveWriter
from tests.helpers import session_in, sessions_in

# §4.2, in DDL order.
CURRENT_COLUMNS = {
    "net_events": "id event_id timestamp domain port decision process_name pid method path query status_code bytes_sent bytes_received duration_ms matched_rule request_headers response_headers request_body_preview response_body_preview conn_type policy_mode policy_action policy_rule policy_reason trace_id turn_id credential_ref",
    "model_calls": "id event_id timestamp provider protocol model process_name pid method path stream system_prompt_preview messages_count tools_count request_bytes request_body_preview message_id status_code text_content thinking_content stop_reason input_tokens output_tokens duration_ms response_bytes estimated_cost_usd trace_id turn_id usage_details credential_ref",
    "model_items": "id event_id model_call_id timestamp provider model path trace_id turn_id kind item_index call_id tool_name arguments content content_hash credential_ref",
    "tool_calls": "id event_id timestamp model_call_id provider status call_index call_id tool_name arguments response_preview origin transport server_name method request_id decision duration_ms error_message process_name bytes_sent bytes_received policy_mode policy_action policy_rule policy_reason trace_id turn_id credential_ref",
    "tool_responses": "id model_call_id call_id content_preview is_error trace_id turn_id credential_ref",
    "event_body_blobs": "id event_id event_type source_table direction content_type original_bytes stored_bytes truncated body_hash body trace_id turn_id created_at",
    "fs_events": "id event_id timestamp action path directory name size trace_id turn_id credential_ref",
    "exec_events": "id event_id timestamp exec_id command exit_code duration_ms stdout_preview stderr_preview stdout_bytes stderr_bytes source trace_id turn_id process_name pid credential_ref",
    "dns_events": "id event_id timestamp qname qtype qclass rcode answer_ip decision matched_rule source_proto process_name upstream_resolver_ms trace_id turn_id policy_mode policy_action policy_rule policy_reason credential_ref",
    "audit_events": "id event_id timestamp pid ppid uid exe comm argv cwd exit_code session_id tty audit_id exec_event_id parent_exe trace_id turn_id credential_ref",
    "substitution_events": "id event_id timestamp material_class source event_type algorithm substitution_ref outcome provider confidence trace_id turn_id context_json",
    "security_rule_events": "id timestamp_unix_ms event_id event_type rule_id rule_action detection_level rule_json event_json trace_id turn_id credential_ref",
    "security_decision_events": "id timestamp_unix_ms event_id event_type stage actor rule_id plugin_id previous_decision requested_decision effective_decision reason event_json trace_id turn_id credential_ref",
    "security_ask_events": "id timestamp_unix_ms ask_id event_id event_type rule_id rule_name status rule_json event_json resolver reason trace_id turn_id",
    "profile_mutation_events": "id timestamp_unix_ms mutation_id profile_id actor category filename affected_path target_kind target_key operation rule_id old_hash old_size new_hash new_size status error trace_id",
}
MAIN_COLUMNS = [
    "id",
    "mode",
    "command",
    "status",
    "created_at",
    "stopped_at",
    "scratch_disk_size_gb",
    "ram_bytes",
    "total_requests",
    "allowed_requests",
    "denied_requests",
    "total_input_tokens",
    "total_output_tokens",
    "total_estimated_cost",
    "total_tool_calls",
    "total_file_events",
    "compressed_size_bytes",
    "vacuumed_at",
    "storage_mode",
    "rootfs_hash",
    "rootfs_version",
    "forked_from",
    "persistent",
    "exec_count",
    "audit_event_count",
]
PRIMARY = (
    "net_events",
    "model_calls",
    "tool_calls",
    "fs_events",
    "exec_events",
    "dns_events",
    "audit_events",
    "substitution_events",
    "model_items",
)
LEGACY = {
    "policy_hook_events",
    "mcp_calls",
    "snapshot_events",
    "session_identity",
    "security_events",
    "security_event_steps",
    "security_event_links",
    "detection_findings",
    "detection_finding_tags",
}
SECURITY_TARGET = {
    "http.request": "net_events",
    "dns.query": "dns_events",
    "model.call": "model_calls",
    "mcp.tool_call": "tool_calls",
    "file.event": "fs_events",
    "file.import": "fs_events",
    "file.export": "fs_events",
    "process.exec": "exec_events",
    "process.exec_complete": "exec_events",
    "process.audit": "audit_events",
    "credential.substitution": "substitution_events",
}
AI_DOMAINS = "(domain LIKE '%.anthropic.com' OR domain LIKE '%.openai.com' OR domain LIKE '%.googleapis.com')"
# mitm_proxy/util.rs is_llm_api_path: only these POSTs become model calls (spec §6.2 #13).
LLM_PATH = "(path LIKE '/v1/messages%' OR path LIKE '/v1/complete%' OR path LIKE '/v1/chat/completions%' OR path LIKE '/v1/responses%' OR path LIKE '/v1/completions%' OR path LIKE '/v1/embeddings%' OR path LIKE '%:generateContent%' OR path LIKE '%:streamGenerateContent%' OR path LIKE '%:embedContent%')"
# Writer habits (spec §4.3): ids that can never pair. Every result of an Ollama call; Gemini
# results written 03-13..06-10 (gemini_<name>_<n>) against calls named by the bare tool name.
UNPAIRABLE_RESPONSE = "((SELECT provider FROM model_calls WHERE id = tr.model_call_id) = 'ollama' AND tr.call_id GLOB 'ollama_tool_result_*') OR ((SELECT provider FROM model_calls WHERE id = tr.model_call_id) = 'google' AND tr.call_id GLOB 'gemini_*' AND NOT EXISTS (SELECT 1 FROM tool_calls WHERE call_id GLOB 'gemini_*'))"
UNPAIRABLE_CALL = "((SELECT provider FROM model_calls WHERE id = tc.model_call_id) = 'google' AND tc.call_id NOT GLOB 'gemini_*')"
# Only Anthropic and OpenAI chat completions mark tool turns with tool_use (spec §4.3).
MARKS_TOOL_TURNS = (
    "(provider = 'anthropic' OR (provider = 'openai' AND path LIKE '/v1/chat/completions%'))"
)
# The checker reports the writer's id habit as info, and an era's readiness for Capsem's own
# routes as info: facts of Capsem's files, not defects the generator injects.
HABIT_KINDS = {"unpairable_tool_ids", "capsem_ready_schema", "result_in_another_trace"}
ROW_KINDS = set(findings.KINDS) - {"rollup_mismatch", "stale_running", "unclean_wal"} - HABIT_KINDS


# -- helpers ----------------------------------------------------------------------------
def open_copy(home: Path, rel: str, tmp: Path) -> sqlite3.Connection:
    """Open a private copy (with -wal/-shm), so reads never touch the shared home."""
    src = home / rel
    dest = tmp / rel.replace("/", "_")
    if src.suffix == ".gz":
        dest = dest.with_suffix("")
        dest.write_bytes(gzip.decompress(src.read_bytes()))
    else:
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{src}{suffix}").exists():
                shutil.copyfile(f"{src}{suffix}", f"{dest}{suffix}")
    conn = sqlite3.connect(dest)
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
    return conn


def tables(conn: sqlite3.Connection) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        )
    }


def cols(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def ids(conn: sqlite3.Connection, sql: str) -> list[int]:
    return [r[0] for r in conn.execute(sql)]


def ledgers(manifest: dict) -> list[dict]:
    """Sessions with a readable ledger of their own."""
    return sessions_in(manifest, has=("ledger",), lacks=("broken", "alias_of"))


# Spec §4.4: the writer puts a result away from its call (retry, resume, history re-sent,
# Gemini CLI's <name>_<epoch-ms>_<i> for the writer's gemini_<name>_<i>), so a result pairs with
# any call of its id, or of its Gemini CLI twin, emitted earlier in the session.
CALL_RECORDED_EARLIER = (
    "SELECT 1 FROM tool_calls e WHERE e.model_call_id < tr.model_call_id AND (e.call_id = tr.call_id"
    " OR (e.call_id GLOB 'gemini_' || e.tool_name || '_[0-9]*'"
    " AND tr.call_id GLOB e.tool_name || '_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_[0-9]*'))"
)
ANSWERED_LATER = (
    "SELECT 1 FROM tool_responses a WHERE a.model_call_id > tc.model_call_id AND (a.call_id = tc.call_id"
    " OR (tc.call_id GLOB 'gemini_' || tc.tool_name || '_[0-9]*'"
    " AND a.call_id GLOB tc.tool_name || '_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_[0-9]*'))"
)


def check(conn: sqlite3.Connection) -> set[tuple[str, str | None, int | None]]:
    """Our own §6.2 checks: {(kind, table, row_id)} for one ledger."""
    have = tables(conn)
    found: set[tuple[str, str | None, int | None]] = set()

    def add(kind: str, table: str | None, rows: list[int] | list[None]) -> None:
        found.update((kind, table, r) for r in rows)

    def has(table: str, *columns: str) -> bool:
        return table in have and set(columns) <= set(cols(conn, table))

    for t in PRIMARY:
        if not has(t, "event_id"):
            continue
        add("null_event_id", t, ids(conn, f"SELECT id FROM {t} WHERE event_id IS NULL"))
        add(
            "bad_event_id",
            t,
            ids(
                conn,
                f"SELECT id FROM {t} WHERE event_id IS NOT NULL AND NOT (length(event_id) = 12 AND event_id NOT GLOB '*[^0-9a-f]*')",
            ),
        )
        add(
            "duplicate_event_id",
            t,
            ids(
                conn,
                f"SELECT id FROM {t} WHERE event_id IN (SELECT event_id FROM {t} WHERE event_id != '000000000000' GROUP BY event_id HAVING count(*) > 1)",
            ),
        )
    if has("tool_calls", "event_id"):
        add(
            "placeholder_event_id",
            "tool_calls",
            ids(conn, "SELECT id FROM tool_calls WHERE event_id = '000000000000'"),
        )
    add(
        "tool_call_parent_missing",
        "tool_calls",
        ids(
            conn,
            "SELECT tc.id FROM tool_calls tc LEFT JOIN model_calls mc ON mc.id = tc.model_call_id WHERE tc.model_call_id IS NOT NULL AND mc.id IS NULL",
        ),
    )
    if has("tool_responses", "trace_id") and has("tool_calls", "trace_id"):
        add(
            "orphan_tool_response",
            "tool_responses",
            ids(
                conn,
                f"SELECT tr.id FROM tool_responses tr WHERE NOT EXISTS (SELECT 1 FROM tool_calls tc WHERE tc.call_id = tr.call_id AND tc.trace_id IS tr.trace_id) AND NOT ({UNPAIRABLE_RESPONSE}) AND NOT EXISTS ({CALL_RECORDED_EARLIER})",
            ),
        )
        add(
            "response_before_call",
            "tool_responses",
            ids(
                conn,
                "SELECT DISTINCT tr.id FROM tool_responses tr JOIN tool_calls tc ON tc.call_id = tr.call_id AND tc.trace_id IS tr.trace_id WHERE NOT EXISTS (SELECT 1 FROM tool_calls e WHERE e.call_id = tr.call_id AND e.trace_id IS tr.trace_id AND e.model_call_id < tr.model_call_id)",
            ),
        )
        if has("tool_calls", "origin"):
            add(
                "tool_call_without_response",
                "tool_calls",
                ids(
                    conn,
                    f"SELECT tc.id FROM tool_calls tc WHERE tc.origin IN ('native','local','mcp_proxy') AND NOT EXISTS (SELECT 1 FROM tool_responses tr WHERE tr.call_id = tc.call_id AND tr.trace_id IS tc.trace_id) AND NOT {UNPAIRABLE_CALL} AND NOT EXISTS ({ANSWERED_LATER})",
                ),
            )
    add(
        "tool_response_parent_missing",
        "tool_responses",
        ids(
            conn,
            "SELECT id FROM tool_responses WHERE model_call_id NOT IN (SELECT id FROM model_calls)",
        ),
    )
    if "model_items" in have:
        add(
            "orphan_model_item",
            "model_items",
            ids(
                conn,
                "SELECT id FROM model_items WHERE model_call_id NOT IN (SELECT id FROM model_calls) OR (kind = 'tool_call' AND NOT EXISTS (SELECT 1 FROM tool_calls tc WHERE tc.call_id = model_items.call_id AND tc.model_call_id = model_items.model_call_id)) OR (kind = 'tool_response' AND call_id NOT IN (SELECT call_id FROM tool_responses))",
            ),
        )
    if "security_rule_events" in have:
        add(
            "unledgered_mcp_call",
            "security_rule_events",
            ids(
                conn,
                "SELECT id FROM security_rule_events WHERE event_type = 'mcp.tool_call' AND event_id NOT IN (SELECT event_id FROM tool_calls)",
            ),
        )
        for event_type, target in SECURITY_TARGET.items():
            add(
                "dangling_security_event",
                "security_rule_events",
                ids(
                    conn,
                    f"SELECT id FROM security_rule_events WHERE event_type = '{event_type}' AND event_id NOT IN (SELECT event_id FROM {target} WHERE event_id IS NOT NULL)",
                ),
            )
        asks = conn.execute(
            "SELECT id, ask_id, event_id, status FROM security_ask_events ORDER BY id"
        ).fetchall()
        by_ask: dict[str, list] = {}
        for row in asks:
            by_ask.setdefault(row[1], []).append(row)
        for rows in by_ask.values():
            statuses = [r[3] for r in rows]
            if statuses == ["pending"]:
                add("ask_pending", "security_ask_events", [rows[0][0]])
            for position, row in enumerate(rows):
                terminal = row[3] != "pending"
                if terminal and "pending" not in statuses[:position]:
                    add("ask_lifecycle", "security_ask_events", [row[0]])
                if terminal and any(s != "pending" for s in statuses[:position]):
                    add("ask_lifecycle", "security_ask_events", [row[0]])
            asked = conn.execute(
                "SELECT 1 FROM security_rule_events WHERE event_id = ? AND rule_action = 'ask'",
                (rows[0][2],),
            ).fetchone()
            if not asked:
                add("ask_lifecycle", "security_ask_events", [r[0] for r in rows])
    if "event_body_blobs" in have:
        add(
            "orphan_body_blob",
            "event_body_blobs",
            ids(
                conn,
                "SELECT id FROM event_body_blobs b WHERE NOT EXISTS (SELECT 1 FROM net_events WHERE b.source_table = 'net_events' AND event_id = b.event_id) AND NOT EXISTS (SELECT 1 FROM model_calls WHERE b.source_table = 'model_calls' AND event_id = b.event_id) AND NOT EXISTS (SELECT 1 FROM tool_calls WHERE b.source_table = 'tool_calls' AND event_id = b.event_id)",
            ),
        )
        add(
            "blob_size_mismatch",
            "event_body_blobs",
            ids(
                conn,
                "SELECT id FROM event_body_blobs WHERE length(body) != stored_bytes OR truncated != (stored_bytes < original_bytes) OR stored_bytes > 10485760",
            ),
        )
        for rid, body, digest in conn.execute(
            "SELECT id, body, body_hash FROM event_body_blobs WHERE truncated = 0"
        ):
            if digest != "blake3:" + blake3.blake3(body).hexdigest():
                add("blob_hash_mismatch", "event_body_blobs", [rid])
    if conn.execute("SELECT count(*) FROM model_calls").fetchone()[0] == 0:
        add(
            "ai_traffic_unparsed",
            "net_events",
            ids(conn, f"SELECT id FROM net_events WHERE {AI_DOMAINS} AND {LLM_PATH}"),
        )
    elif has("net_events", "trace_id"):
        add(
            "ai_traffic_unparsed",
            "net_events",
            ids(
                conn,
                f"SELECT id FROM net_events WHERE method = 'POST' AND {AI_DOMAINS} AND {LLM_PATH} AND (trace_id IS NULL OR trace_id NOT IN (SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL))",
            ),
        )
    add(
        "model_call_quality",
        "model_calls",
        ids(
            conn,
            "SELECT id FROM model_calls WHERE model IS NULL OR (input_tokens IS NULL AND output_tokens IS NULL) OR request_body_preview IS NULL OR status_code IS NOT 200 OR (estimated_cost_usd = 0 AND (input_tokens > 0 OR output_tokens > 0) AND provider IN ('anthropic','openai','google'))",
        ),
    )
    add(
        "stop_reason_mismatch",
        "model_calls",
        ids(
            conn,
            f"SELECT id FROM model_calls mc WHERE {MARKS_TOOL_TURNS} AND (stop_reason = 'tool_use') != EXISTS (SELECT 1 FROM tool_calls tc WHERE tc.model_call_id = mc.id)",
        ),
    )
    if "exec_events" in have:
        add(
            "exec_incomplete",
            "exec_events",
            ids(conn, "SELECT id FROM exec_events WHERE exit_code IS NULL"),
        )
        add(
            "audit_exec_missing",
            "audit_events",
            ids(
                conn,
                "SELECT id FROM audit_events WHERE exec_event_id IS NOT NULL AND exec_event_id NOT IN (SELECT id FROM exec_events)",
            ),
        )
    for t in sorted(have):
        names = cols(conn, t)
        if "timestamp" in names:
            add(
                "bad_timestamp",
                t,
                ids(conn, f"SELECT id FROM {t} WHERE julianday(timestamp) IS NULL"),
            )
        if "credential_ref" in names:
            add(
                "bad_credential_ref",
                t,
                ids(
                    conn,
                    f"SELECT id FROM {t} WHERE credential_ref IS NOT NULL AND NOT (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:*' AND substr(credential_ref, 19) NOT GLOB '*[^0-9a-f]*')",
                ),
            )
        if "turn_id" in names and "trace_id" in names and not t.startswith("security_"):
            add(
                "turn_trace_mismatch",
                t,
                ids(
                    conn,
                    f"SELECT id FROM {t} WHERE turn_id IS NOT NULL AND turn_id IS NOT trace_id",
                ),
            )
    add("legacy_tables", None, [])
    found.update(("legacy_tables", t, None) for t in have if t in LEGACY or t.startswith("ai_"))
    # As a reader opens it: read-only (integrity_check then skips CHECK constraints).
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    if reader.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
        found.add(("schema_not_ready", None, None))
    reader.close()
    return found


def manifest_rows(manifest: dict, session: str) -> set[tuple[str, str | None, int | None]]:
    return {
        (d["kind"], d["table"], d["row_id"])
        for d in manifest["defects"]
        if d["session"] == session and d["kind"] in ROW_KINDS
    }


# -- manifest ---------------------------------------------------------------------------
def test_manifest_vocabulary(manifest: dict) -> None:
    assert manifest["format"] == 1 and manifest["main_db"] == "sessions/main.db"
    assert {d["kind"] for d in manifest["defects"]} == set(findings.KINDS) - HABIT_KINDS, (
        "every finding kind is injected"
    )
    assert not {d["kind"] for d in manifest["defects"]} & {h["kind"] for h in manifest["habits"]}
    assert {h["kind"] for h in manifest["hostile"]} == set(findings.HOSTILE_KINDS)
    assert {b["kind"] for b in manifest["broken_files"]} == set(findings.BROKEN_FILE_KINDS) - {
        "registry_invalid"
    }
    assert len({s["id"] for s in manifest["sessions"]}) == len(manifest["sessions"])


def test_manifest_file_matches_return_value(capsem_home: Path, manifest: dict) -> None:
    text = (capsem_home / "manifest.json").read_text()
    assert json.loads(text) == manifest
    assert text == json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def test_every_layout_and_era(manifest: dict) -> None:
    kinds = Counter(s["kind"] for s in manifest["sessions"])
    assert {
        "ephemeral",
        "persistent",
        "failed",
        "run",
        "legacy",
        "legacy_gz",
        "registry_only",
    } <= set(kinds)
    assert {s["era"] for s in manifest["sessions"]} >= {"head", "0.16", "1.1", "migrated"}
    assert any(s["ledger"] is None and s["main_db_row"] for s in manifest["sessions"])
    assert any(
        s["ledger"] and not s["main_db_row"] and not s["broken"] for s in manifest["sessions"]
    )
    ledgers_ = [s["ledger"] for s in manifest["sessions"] if s["ledger"]]
    assert any("-failed-" in p for p in ledgers_) and any(p.endswith(".gz") for p in ledgers_)
    assert any(p.startswith("run/sessions/code-") for p in ledgers_)


# -- schemas ----------------------------------------------------------------------------
def test_current_schema_matches_spec(capsem_home: Path, manifest: dict, tmp_path: Path) -> None:
    clean = session_in(manifest, era="head", has=("clean", "ledger"))
    conn = open_copy(capsem_home, clean["ledger"], tmp_path)
    assert tables(conn) == set(CURRENT_COLUMNS)
    for table, expected in CURRENT_COLUMNS.items():
        assert cols(conn, table) == expected.split(), table
    assert (
        conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'"
        ).fetchone()[0]
        == 1
    )


INVALID = [
    "INSERT INTO model_calls (event_id, timestamp, provider, protocol, method, path) VALUES ('0123456789ab', 't', 'x', 'bogus', 'POST', '/')",
    "INSERT INTO model_calls (event_id, timestamp, provider, method, path) VALUES ('XYZ', 't', 'x', 'POST', '/')",
    "INSERT INTO model_items (model_call_id, timestamp, provider, path, kind, item_index, content_hash) VALUES (1, 't', 'p', '/', 'bogus', 1, 'blake3:' || hex(zeroblob(32)))",
    "INSERT INTO tool_calls (call_index, call_id, tool_name, status) VALUES (0, 'c', 't', 'bogus')",
    "INSERT INTO tool_calls (call_index, call_id, tool_name, transport) VALUES (0, 'c', 't', 'carrier-pigeon')",
    "INSERT INTO tool_calls (call_index, call_id, tool_name, credential_ref) VALUES (0, 'c', 't', 'credential:blake3:short')",
    "INSERT INTO event_body_blobs (event_id, event_type, source_table, direction, original_bytes, stored_bytes, truncated, body_hash, created_at, body) VALUES ('0123456789ab', 'http.request', 'fs_events', 'request', 1, 1, 0, 'blake3:' || lower(hex(zeroblob(32))), 't', x'00')",
    "INSERT INTO event_body_blobs (event_id, event_type, source_table, direction, original_bytes, stored_bytes, truncated, body_hash, created_at, body) VALUES ('0123456789ab', 'http.request', 'net_events', 'sideways', 1, 1, 0, 'blake3:' || lower(hex(zeroblob(32))), 't', x'00')",
    "INSERT INTO event_body_blobs (event_id, event_type, source_table, direction, original_bytes, stored_bytes, truncated, body_hash, created_at, body) VALUES ('0123456789ab', 'http.request', 'net_events', 'request', 1, 2, 0, 'blake3:' || lower(hex(zeroblob(32))), 't', x'00')",
    "INSERT INTO event_body_blobs (event_id, event_type, source_table, direction, original_bytes, stored_bytes, truncated, body_hash, created_at, body) VALUES ('0123456789ab', 'nope', 'net_events', 'request', 1, 1, 0, 'blake3:' || lower(hex(zeroblob(32))), 't', x'00')",
    "INSERT INTO event_body_blobs (event_id, event_type, source_table, direction, original_bytes, stored_bytes, truncated, body_hash, created_at, body) VALUES ('0123456789ab', 'http.request', 'net_events', 'request', 1, 1, 2, 'blake3:' || lower(hex(zeroblob(32))), 't', x'00')",
    "INSERT INTO event_body_blobs (event_id, event_type, source_table, direction, original_bytes, stored_bytes, truncated, body_hash, created_at, body) VALUES ('0123456789ab', 'http.request', 'net_events', 'request', 1, 1, 0, 'md5:abc', 't', x'00')",
    "INSERT INTO substitution_events (timestamp, material_class, algorithm, source, event_type, substitution_ref, outcome) VALUES ('t', 'credential', 'blake3', 's', 'e', 'credential:blake3:' || lower(hex(zeroblob(32))), 'stolen')",
    "INSERT INTO security_rule_events (timestamp_unix_ms, event_id, event_type, rule_id, rule_action, rule_json, event_json) VALUES (1, '0123456789ab', 'http.request', 'r', 'shrug', '{}', '{}')",
    "INSERT INTO security_rule_events (timestamp_unix_ms, event_id, event_type, rule_id, rule_action, detection_level, rule_json, event_json) VALUES (1, '0123456789ab', 'http.request', 'r', 'allow', 'extreme', '{}', '{}')",
    "INSERT INTO security_rule_events (timestamp_unix_ms, event_id, event_type, rule_id, rule_action, rule_json, event_json) VALUES (1, '0123456789ab', 'http.request', 'r', 'allow', '{not json', '{}')",
    "INSERT INTO security_decision_events (timestamp_unix_ms, event_id, event_type, stage, actor, previous_decision, requested_decision, effective_decision, event_json) VALUES (1, '0123456789ab', 'http.request', 'lunch', 'a', 'allow', 'allow', 'allow', '{}')",
    "INSERT INTO security_decision_events (timestamp_unix_ms, event_id, event_type, stage, actor, previous_decision, requested_decision, effective_decision, event_json) VALUES (1, '0123456789ab', 'http.request', 'rule', 'a', 'allow', 'allow', 'maybe', '{}')",
    "INSERT INTO security_ask_events (timestamp_unix_ms, ask_id, event_id, event_type, rule_id, rule_name, status, rule_json, event_json) VALUES (1, '0123456789ab', '0123456789ab', 'http.request', 'r', 'n', 'ignored', '{}', '{}')",
    "INSERT INTO profile_mutation_events (timestamp_unix_ms, mutation_id, profile_id, actor, category, filename, affected_path, target_kind, target_key, operation, old_hash, old_size, new_hash, new_size, status) VALUES (1, '0123456789ab', 'p', 'a', 'c', 'f', 'p/f', 'rule', 'k', 'o', 'blake3:' || lower(hex(zeroblob(32))), 1, 'blake3:' || lower(hex(zeroblob(32))), 1, 'pending')",
]


@pytest.mark.parametrize("sql", INVALID)
def test_current_checks_reject_invalid_values(
    capsem_home: Path, manifest: dict, tmp_path: Path, sql: str
) -> None:
    clean = session_in(manifest, era="head", has=("clean", "ledger"))
    conn = open_copy(capsem_home, clean["ledger"], tmp_path)
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        conn.execute(sql)


def test_old_eras(capsem_home: Path, manifest: dict, tmp_path: Path) -> None:
    by_era = {s["era"]: s for s in ledgers(manifest)}
    march = open_copy(capsem_home, by_era["0.16"]["ledger"], tmp_path)
    assert {"mcp_calls", "snapshot_events"} <= tables(march)
    assert not tables(march) & {
        "dns_events",
        "exec_events",
        "audit_events",
        "model_items",
        "event_body_blobs",
        "security_rule_events",
    }
    assert all(
        "event_id" not in cols(march, t) and "turn_id" not in cols(march, t) for t in tables(march)
    )
    fraction = march.execute("SELECT timestamp FROM model_calls").fetchone()[0].split(".")[1]
    assert len(fraction) == len("123456789Z"), "nanoseconds before 2026-06-11"
    v11 = open_copy(capsem_home, by_era["1.1"]["ledger"], tmp_path)
    assert {"dns_events", "exec_events", "audit_events", "mcp_calls"} <= tables(v11)
    assert "trace_id" in cols(v11, "net_events") and "mcp_call_id" in cols(v11, "exec_events")
    assert not tables(v11) & {
        "model_items",
        "event_body_blobs",
        "security_rule_events",
        "substitution_events",
    }
    assert all(
        "event_id" not in cols(v11, t) and "turn_id" not in cols(v11, t) for t in tables(v11)
    )
    mig = open_copy(capsem_home, by_era["migrated"]["ledger"], tmp_path)
    assert set(CURRENT_COLUMNS) <= tables(mig) and "snapshot_events" not in tables(mig)
    assert {
        "mcp_calls",
        "session_identity",
        "ai_model_interactions",
        "security_events",
        "detection_findings",
    } <= tables(mig)
    assert cols(mig, "net_events")[1] != "event_id", "columns added by migration sit at the end"
    assert "mcp_call_id" not in cols(mig, "tool_calls") and "mcp_call_id" in cols(
        mig, "exec_events"
    )
    assert (
        mig.execute("SELECT count(*) FROM tool_calls WHERE event_id = '000000000000'").fetchone()[0]
        > 0
    )
    assert mig.execute("SELECT count(*) FROM net_events WHERE event_id IS NULL").fetchone()[0] > 0


def test_file_headers_and_leftovers(capsem_home: Path, manifest: dict) -> None:
    """Capsem's files are WAL mode; only live, unclean and broken ledgers keep a non-empty
    -wal; a finished ledger someone read with mode=ro has a 0-byte -wal and a 32 KiB -shm."""
    walled = {s["id"] for s in manifest["sessions"] if s["live"]} | {
        d["session"] for d in manifest["defects"] if d["kind"] == "unclean_wal"
    }
    read = {
        s["id"] for s in sessions_in(manifest, where=lambda s: s["habits"].get("reader_left_wal"))
    }
    assert read and not read & walled
    for s in ledgers(manifest):
        path = capsem_home / s["ledger"]
        if path.suffix == ".gz":
            assert gzip.decompress(path.read_bytes())[:16] == b"SQLite format 3\x00"
            continue
        header = path.read_bytes()[:20]
        assert header[18:20] == b"\x02\x02", s["id"]
        wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
        assert wal.exists() == (s["id"] in walled | read), s["id"]
        if s["id"] in read:
            assert wal.stat().st_size == 0 and shm.stat().st_size == 32768, s["id"]
        elif s["id"] in walled:
            assert wal.stat().st_size > 0, s["id"]
    main = capsem_home / "sessions" / "main.db"
    assert main.read_bytes()[18:20] == b"\x02\x02" and not Path(f"{main}-wal").exists()


def test_main_db(capsem_home: Path, manifest: dict, tmp_path: Path) -> None:
    conn = open_copy(capsem_home, "sessions/main.db", tmp_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    assert cols(conn, "sessions") == MAIN_COLUMNS
    assert {
        "ai_usage",
        "tool_usage",
        "mcp_usage",
        "profile_mutation_events",
        "net_events",
    } <= tables(conn)
    rows = {r[0]: r[1] for r in conn.execute("SELECT id, status FROM sessions")}
    assert rows == {s["id"]: s["status"] for s in manifest["sessions"] if s["main_db_row"]}
    assert set(rows.values()) <= {"running", "stopped", "crashed", "vacuumed", "terminated"}


def test_old_main_db(tmp_path: Path) -> None:
    generate_home(
        tmp_path / "old",
        GenerateOptions(old_main_db=True, defects=False, hostile=False, broken=False),
    )
    conn = sqlite3.connect(tmp_path / "old" / "sessions" / "main.db")
    names = cols(conn, "sessions")
    assert "total_mcp_calls" in names and names.index("total_mcp_calls") < names.index(
        "compressed_size_bytes"
    )
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
    assert conn.execute("SELECT max(total_mcp_calls) FROM sessions").fetchone()[0] > 0


# -- invariants and defects -------------------------------------------------------------
def test_clean_sessions_satisfy_every_invariant(
    capsem_home: Path, manifest: dict, tmp_path: Path
) -> None:
    clean = [s for s in ledgers(manifest) if s["clean"]]
    assert len(clean) >= 8
    for s in clean:
        assert check(open_copy(capsem_home, s["ledger"], tmp_path)) == set(), s["id"]


def test_defects_present_exactly_as_listed(
    capsem_home: Path, manifest: dict, tmp_path: Path
) -> None:
    for s in ledgers(manifest):
        found = check(open_copy(capsem_home, s["ledger"], tmp_path))
        assert found == manifest_rows(manifest, s["id"]), s["id"]


def test_counts_and_traces(capsem_home: Path, manifest: dict, tmp_path: Path) -> None:
    for s in ledgers(manifest):
        conn = open_copy(capsem_home, s["ledger"], tmp_path)
        actual = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables(conn)}
        assert {t: n for t, n in actual.items() if n} == s["counts"], s["id"]
        traces = [
            r[0]
            for r in conn.execute(
                "SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL GROUP BY trace_id ORDER BY min(id)"
            )
        ]
        assert traces == s["traces"]


def test_current_traces_are_agentic_loops(
    capsem_home: Path, manifest: dict, tmp_path: Path
) -> None:
    s = next(
        s
        for s in ledgers(manifest)
        if s["clean"] and s["era"] == "head" and s["kind"] == "ephemeral" and not s["live"]
    )
    conn = open_copy(capsem_home, s["ledger"], tmp_path)
    ambient = s["habits"]["ambient_trace"]
    assert len(ambient) == 1 and len(ambient[0]) == 16 and ambient[0] in s["traces"]
    assert (
        conn.execute(
            "SELECT count(*) FROM model_calls WHERE trace_id = ? AND stop_reason = 'end_turn'",
            ambient,
        ).fetchone()[0]
        == 1
    ), "the title call takes the ambient trace"
    for trace in s["traces"]:
        if trace in ambient:
            continue
        calls = conn.execute(
            "SELECT id, stop_reason, turn_id FROM model_calls WHERE trace_id = ? ORDER BY id",
            (trace,),
        ).fetchall()
        assert len(calls) == 3 and all(c[2] == trace for c in calls)
        assert [c[1] for c in calls] == ["tool_use", "tool_use", "end_turn"]
        for earlier, later in zip(calls, calls[1:], strict=False):
            emitted = ids(
                conn, f"SELECT call_id FROM tool_calls WHERE model_call_id = {earlier[0]}"
            )
            carried = ids(
                conn, f"SELECT call_id FROM tool_responses WHERE model_call_id = {later[0]}"
            )
            assert emitted and sorted(emitted) == sorted(carried)
        indexes = ids(
            conn,
            f"SELECT item_index FROM model_items WHERE model_call_id = {calls[0][0]} ORDER BY id",
        )
        assert indexes[0] == 1 and indexes == sorted(indexes)
        assert (
            conn.execute(
                "SELECT count(*) FROM net_events WHERE trace_id = ? AND method = 'POST'", (trace,)
            ).fetchone()[0]
            == 3
        )
    mcp = conn.execute(
        "SELECT t.event_id, t.call_id FROM tool_calls t WHERE origin = 'mcp'"
    ).fetchall()
    assert mcp and all(c.isdigit() for _e, c in mcp)
    for event_id, _call in mcp:
        assert (
            conn.execute(
                "SELECT count(*) FROM security_rule_events WHERE event_id = ? AND event_type = 'mcp.tool_call'",
                (event_id,),
            ).fetchone()[0]
            == 1
        )
    assert (
        conn.execute(
            "SELECT count(*) FROM model_calls WHERE timestamp NOT GLOB '????-??-??T??:??:??.??????Z'"
        ).fetchone()[0]
        == 0
    )
    assert (
        conn.execute(
            "SELECT count(*) FROM exec_events WHERE exit_code IS NULL OR duration_ms IS NULL"
        ).fetchone()[0]
        == 0
    )


def test_costs_follow_the_pricing_formula(
    capsem_home: Path, manifest: dict, tmp_path: Path
) -> None:
    for s in ledgers(manifest):
        if not s["clean"] or s["era"] != "head":
            continue
        conn = open_copy(capsem_home, s["ledger"], tmp_path)
        for provider, cost, inp, out in conn.execute(
            "SELECT provider, estimated_cost_usd, input_tokens, output_tokens FROM model_calls"
        ):
            assert (cost == 0) == (provider == "ollama"), (provider, cost, inp, out)
        for (details,) in conn.execute(
            "SELECT usage_details FROM model_calls WHERE usage_details IS NOT NULL"
        ):
            assert set(json.loads(details)) <= {"cache_read", "thinking"}


def test_rollups_match_ledgers(capsem_home: Path, manifest: dict, tmp_path: Path) -> None:
    main = open_copy(capsem_home, "sessions/main.db", tmp_path)
    main.row_factory = sqlite3.Row
    mismatched = {d["session"] for d in manifest["defects"] if d["kind"] == "rollup_mismatch"}
    checked = 0
    stopped = sessions_in(
        manifest,
        has=("ledger",),
        lacks=("broken",),
        where=lambda s: s["status"] in ("stopped", "crashed"),
    )
    for s in stopped:
        row = main.execute("SELECT * FROM sessions WHERE id = ?", (s["id"],)).fetchone()
        ledger = open_copy(capsem_home, s["ledger"], tmp_path)
        fresh = {
            "total_requests": "SELECT count(*) FROM net_events",
            "allowed_requests": "SELECT count(*) FROM net_events WHERE decision = 'allowed'",
            "denied_requests": "SELECT count(*) FROM net_events WHERE decision = 'denied'",
            "total_input_tokens": "SELECT coalesce(sum(input_tokens), 0) FROM model_calls",
            "total_output_tokens": "SELECT coalesce(sum(output_tokens), 0) FROM model_calls",
            "total_tool_calls": "SELECT count(*) FROM tool_calls",
            "total_file_events": "SELECT count(*) FROM fs_events",
        }
        if "exec_events" in tables(ledger):
            fresh |= {
                "exec_count": "SELECT count(*) FROM exec_events",
                "audit_event_count": "SELECT count(*) FROM audit_events",
            }
        same = all(row[k] == ledger.execute(q).fetchone()[0] for k, q in fresh.items())
        cost = ledger.execute(
            "SELECT coalesce(sum(estimated_cost_usd), 0) FROM model_calls"
        ).fetchone()[0]
        same = same and abs(row["total_estimated_cost"] - cost) < 1e-9
        if s["habits"].get("legacy_run_zeros"):
            zeroed = (
                "total_input_tokens",
                "total_output_tokens",
                "total_estimated_cost",
                "total_tool_calls",
                "exec_count",
                "audit_event_count",
            )
            assert all(row[k] == 0 for k in zeroed) and not same, s["id"]
            assert all(
                row[k] == ledger.execute(q).fetchone()[0]
                for k, q in fresh.items()
                if k not in zeroed
            ), s["id"]
            continue
        assert same == (s["id"] not in mismatched), s["id"]
        checked += 1
    assert checked >= 10


def test_main_db_only_kinds(capsem_home: Path, manifest: dict) -> None:
    by_id = {s["id"]: s for s in manifest["sessions"]}
    stale = [d["session"] for d in manifest["defects"] if d["kind"] == "stale_running"]
    assert stale and all(
        by_id[i]["status"] == "running" and by_id[i]["ledger"] is None for i in stale
    )
    unclean = [d["session"] for d in manifest["defects"] if d["kind"] == "unclean_wal"]
    for sid in unclean:
        wal = Path(f"{capsem_home / by_id[sid]['ledger']}-wal")
        assert by_id[sid]["status"] in ("stopped", "crashed") and wal.stat().st_size > 0


def test_live_session_has_uncheckpointed_frames(
    capsem_home: Path, manifest: dict, tmp_path: Path
) -> None:
    live = sessions_in(manifest, has=("live",))
    assert live and all(s["status"] == "running" for s in live)
    conn = open_copy(capsem_home, live[0]["ledger"], tmp_path)
    path = tmp_path / live[0]["ledger"].replace("/", "_")
    frozen = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    assert (
        conn.execute("SELECT count(*) FROM model_calls").fetchone()[0]
        == live[0]["counts"]["model_calls"]
    )
    assert (
        frozen.execute("SELECT count(*) FROM model_calls").fetchone()[0]
        < live[0]["counts"]["model_calls"]
    )


def test_hostile_values_are_where_listed(capsem_home: Path, manifest: dict, tmp_path: Path) -> None:
    by_id = {s["id"]: s for s in manifest["sessions"]}
    registry = (capsem_home / "run" / "persistent_registry.json").read_text()
    for h in manifest["hostile"]:
        if h["table"] == "persistent_registry.json":
            assert "__pwned" in registry
            continue
        rel = "sessions/main.db" if h["table"] == "sessions" else by_id[h["session"]]["ledger"]
        conn = open_copy(capsem_home, rel, tmp_path)
        conn.text_factory = bytes
        key = h["row_id"] if h["row_id"] is not None else h["session"]
        value, kind = conn.execute(
            f"SELECT {h['column']}, typeof({h['column']}) FROM {h['table']} WHERE id = ?", (key,)
        ).fetchone()
        if h["kind"] == "html_payload":
            assert b"__pwned" in value
        elif h["kind"] == "huge_cell":
            assert len(value) >= 3 * 1024 * 1024
        elif h["kind"] == "binary_value":
            assert kind == b"blob"
        else:
            assert kind == b"text"
            with pytest.raises(UnicodeDecodeError):
                value.decode("utf-8")


def test_hostile_session_is_otherwise_clean(manifest: dict) -> None:
    hostile_sessions = {
        h["session"]
        for h in manifest["hostile"]
        if h["table"] not in ("sessions", "persistent_registry.json")
    }
    assert hostile_sessions and all(
        s["clean"] for s in manifest["sessions"] if s["id"] in hostile_sessions
    )


def test_broken_files(capsem_home: Path, manifest: dict) -> None:
    for b in manifest["broken_files"]:
        path = capsem_home / b["path"]
        data = path.read_bytes() if b["kind"] != "unreadable" or os.geteuid() == 0 else b""
        if b["kind"] == "zero_bytes":
            assert data == b""
        elif b["kind"] == "not_sqlite":
            assert data and not data.startswith(b"SQLite format 3")
        elif b["kind"] == "truncated":
            page_size = int.from_bytes(data[16:18], "big")
            assert (
                data.startswith(b"SQLite format 3")
                and len(data) < int.from_bytes(data[28:32], "big") * page_size
            )
        elif b["kind"] == "unreadable":
            assert stat.S_IMODE(path.stat().st_mode) == 0
        elif b["kind"] == "wal_without_shm":
            assert Path(f"{path}-wal").stat().st_size > 0 and not Path(f"{path}-shm").exists()


def test_registry_and_identities(capsem_home: Path, manifest: dict) -> None:
    registry = json.loads((capsem_home / "run" / "persistent_registry.json").read_text())["vms"]
    assert all(name == entry["name"] for name, entry in registry.items())
    assert {"co-work-1", "code-vm1", "code-3"} <= set(registry)
    ids_ = {s["id"] for s in manifest["sessions"]}
    assert "code-3" in ids_ and registry["code-3"]["id"] != "code-3", (
        "a name equal to another session's id"
    )
    vm = registry["code-vm1"]
    assert vm["id"] in ids_ and "code-vm1" in ids_ and Path(vm["session_dir"]).name == "code-vm1"
    for s in manifest["sessions"]:
        if s["name"] in registry and s["ledger"]:
            assert (
                Path(registry[s["name"]]["session_dir"])
                == (capsem_home / s["ledger"]).parent.absolute()
            )


def test_broken_registry_option(tmp_path: Path) -> None:
    m = generate_home(
        tmp_path / "h",
        GenerateOptions(broken_registry=True, defects=False, hostile=False, broken=False),
    )
    assert m["broken_files"] == [
        {"kind": "registry_invalid", "path": "run/persistent_registry.json", "session": None}
    ]
    with pytest.raises(json.JSONDecodeError):
        json.loads((tmp_path / "h" / m["broken_files"][0]["path"]).read_text())


def test_no_defects_option(tmp_path: Path) -> None:
    m = generate_home(tmp_path / "h", GenerateOptions(defects=False, hostile=False, broken=False))
    era_only = {"legacy_tables", "null_event_id", "placeholder_event_id", "bad_timestamp"}
    assert {d["kind"] for d in m["defects"]} <= era_only
    assert not m["hostile"] and not m["broken_files"]


# -- determinism ------------------------------------------------------------------------
def snapshot(home: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted(home.rglob("*")):
        if path.is_file():
            files[path.relative_to(home).as_posix()] = path.read_bytes().replace(
                str(home.absolute()).encode(), b"<HOME>"
            )
    return files


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    """Every file, WAL and -shm included; the registry's absolute session_dir is normalised."""
    one = generate_home(tmp_path / "a", GenerateOptions(seed=7, sessions=12))
    two = generate_home(tmp_path / "b", GenerateOptions(seed=7, sessions=12))
    assert one == two
    first, second = snapshot(tmp_path / "a"), snapshot(tmp_path / "b")
    assert list(first) == list(second)
    assert [k for k in first if first[k] != second[k]] == []
    other = snapshot_keys = generate_home(tmp_path / "c", GenerateOptions(seed=8))
    assert other["sessions"][0]["id"] != one["sessions"][0]["id"] and snapshot_keys


# -- CLI --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [["--sessions", "-1"], ["--traces", "-2"], ["--calls", "-1"], ["--big-session-rows", "-5"]],
)
def test_cli_rejects_negative_sizes(tmp_path: Path, args: list[str]) -> None:
    result = CliRunner().invoke(generate_command, [str(tmp_path / "h"), *args])
    assert result.exit_code != 0 and "negative" in result.output
    assert not (tmp_path / "h").exists()


def test_cli_rejects_unwritable_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for target in (blocker / "home", blocker, Path("/proc/capsem-home")):
        result = CliRunner().invoke(generate_command, [str(target)])
        assert result.exit_code != 0, target
        errors = [line for line in result.output.splitlines() if line.startswith("Error")]
        assert len(errors) == 1, result.output
    assert blocker.read_text() == "x"


def test_cli_refuses_existing_home_without_force(tmp_path: Path) -> None:
    home = tmp_path / "h"
    runner = CliRunner()
    assert runner.invoke(generate_command, [str(home), "--no-broken"]).exit_code == 0
    before = snapshot(home)
    result = runner.invoke(generate_command, [str(home), "--seed", "2"])
    assert result.exit_code != 0 and "already a Capsem home" in result.output
    assert snapshot(home) == before
    result = runner.invoke(generate_command, [str(home), "--seed", "2", "--force"])
    assert result.exit_code == 0, result.output
    assert json.loads((home / "manifest.json").read_text())["seed"] == 2


def test_cli_generates_sizes(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        generate_command,
        [
            str(tmp_path / "h"),
            "--sessions",
            "20",
            "--traces",
            "1",
            "--calls",
            "2",
            "--no-defects",
            "--no-hostile",
            "--no-broken",
        ],
    )
    assert result.exit_code == 0, result.output
    m = json.loads((tmp_path / "h" / "manifest.json").read_text())
    bulk = sessions_in(m, has=("ledger", "name"), where=lambda s: s["name"].startswith("bulk-"))
    # One loop of 2 calls per trace, plus the title call on the ambient trace.
    assert bulk and all(s["counts"]["model_calls"] == 3 for s in bulk)


# -- live -------------------------------------------------------------------------------
def test_live_writer_appends_while_readable(manifest, private_home) -> None:
    home = private_home
    session = session_in(manifest, era="head", kind="ephemeral", has=("clean",), lacks=("live",))
    path = home / session["ledger"]
    start = session["counts"]["net_events"]
    with LiveWriter(home, session["id"], rate=400) as writer:
        # Until the writer's rows show (on a loaded machine its start takes seconds); the
        # deadline only bounds a writer that never writes.
        seen, deadline = [], time.monotonic() + 120
        while time.monotonic() < deadline:
            reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            seen.append(reader.execute("SELECT count(*) FROM net_events").fetchone()[0])
            reader.close()
            if seen[-1] > start + 5:
                break
            time.sleep(0.1)
        assert Path(f"{path}-wal").exists()
    assert writer.process is not None and writer.process.returncode == 0
    assert seen[-1] > start and not Path(f"{path}-wal").exists()
    assert check(sqlite3.connect(path)) == set(), "live rows are clean too"


def test_fork_starts_with_parent_rows(capsem_home: Path, manifest: dict, tmp_path: Path) -> None:
    by_name = {s["name"]: s for s in manifest["sessions"] if s["name"]}
    fork, parent = by_name["co-work-1-fork"], by_name["co-work-1"]
    assert (
        fork["forked_from"] == "co-work-1"
        and fork["traces"][: len(parent["traces"])] == parent["traces"]
    )
    shared = open_copy(capsem_home, fork["ledger"], tmp_path).execute(
        "SELECT event_id FROM net_events"
    )
    parent_ids = {
        r[0]
        for r in open_copy(capsem_home, parent["ledger"], tmp_path).execute(
            "SELECT event_id FROM net_events"
        )
    }
    assert parent_ids <= {r[0] for r in shared}


# -- writer habits (spec §3.5, §4.3, §4.4, §4.7) -----------------------------------------
def habit_rows(conn: sqlite3.Connection) -> dict[str, set]:
    """The habits a ledger shows, found from its rows alone."""
    have = tables(conn)
    found: dict[str, set] = {
        "tool_responses": set(
            ids(conn, f"SELECT tr.id FROM tool_responses tr WHERE {UNPAIRABLE_RESPONSE}")
        ),
        "tool_calls": set(
            ids(
                conn,
                "SELECT tc.id FROM tool_calls tc WHERE (SELECT provider FROM model_calls WHERE id = tc.model_call_id) = 'google' AND tc.call_id NOT GLOB 'gemini_*' AND NOT EXISTS (SELECT 1 FROM tool_responses r WHERE r.call_id = tc.call_id)",
            )
        ),
        "provider_posts": set(
            ids(
                conn,
                f"SELECT id FROM net_events WHERE method = 'POST' AND {AI_DOMAINS} AND NOT {LLM_PATH}",
            )
        ),
        "end_turn_tool_calls": set(
            ids(
                conn,
                "SELECT id FROM model_calls mc WHERE stop_reason = 'end_turn' AND EXISTS (SELECT 1 FROM tool_calls tc WHERE tc.model_call_id = mc.id)",
            )
        ),
        "truncated_blobs": set(),
        "gemini_reused_ids": set(),
    }
    if "event_body_blobs" in have:
        found["truncated_blobs"] = set(
            ids(conn, "SELECT id FROM event_body_blobs WHERE truncated = 1")
        )
    if has_column(conn, "tool_calls", "trace_id"):
        found["gemini_reused_ids"] = set(
            ids(
                conn,
                "SELECT call_id FROM tool_calls WHERE call_id GLOB 'gemini_*' GROUP BY call_id, trace_id HAVING count(DISTINCT model_call_id) > 1",
            )
        )
    return found


def has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return table in tables(conn) and column in cols(conn, table)


def test_habits_are_what_the_files_show(capsem_home: Path, manifest: dict, tmp_path: Path) -> None:
    seen: Counter = Counter()
    for s in ledgers(manifest):
        habits = s["habits"]
        found = habit_rows(open_copy(capsem_home, s["ledger"], tmp_path))
        listed = {
            "tool_responses": set(habits["unpairable_tool_ids"]["tool_responses"]),
            "tool_calls": set(habits["unpairable_tool_ids"]["tool_calls"]),
            "provider_posts": set(habits["provider_posts"]),
            "end_turn_tool_calls": set(habits["end_turn_tool_calls"]),
            "truncated_blobs": set(habits["truncated_blobs"]),
            "gemini_reused_ids": set(habits["gemini_reused_ids"]),
        }
        assert found == listed, s["id"]
        seen.update(k for k, v in found.items() if v)
        seen.update(k for k in ("legacy_run_zeros", "reader_left_wal") if habits[k])
    assert set(seen) == {
        "tool_responses",
        "tool_calls",
        "provider_posts",
        "end_turn_tool_calls",
        "truncated_blobs",
        "gemini_reused_ids",
        "legacy_run_zeros",
        "reader_left_wal",
    }, "every habit occurs in the default home"
    top = {(h["kind"], h["session"], h["table"], h["row_id"]) for h in manifest["habits"]}
    assert ("unpairable_tool_ids", "tool_responses") in {(k, t) for k, _s, t, _r in top}


def test_ids_and_stop_reasons_follow_the_writer(
    capsem_home: Path, manifest: dict, tmp_path: Path
) -> None:
    """Gemini synthesizes gemini_<name>_<i> (i from 0 in each response); Ollama's calls are never
    parsed and its results are ollama_tool_result_<message index>; only Anthropic and chat
    completions say tool_use."""
    stops: set[tuple[str, str, str]] = set()
    for s in ledgers(manifest):
        if s["era"] not in ("head", "1.3") or not s["clean"]:
            continue
        conn = open_copy(capsem_home, s["ledger"], tmp_path)
        for provider, path, stop, emitted in conn.execute(
            "SELECT provider, path, stop_reason, EXISTS (SELECT 1 FROM tool_calls tc WHERE tc.model_call_id = mc.id) FROM model_calls mc"
        ):
            api = "chat" if path.startswith("/v1/chat/") else provider
            stops.add((api, stop, "tools" if emitted else "none"))
        for call_id, index in conn.execute(
            "SELECT call_id, call_index FROM tool_calls WHERE provider = 'google'"
        ):
            assert call_id.startswith("gemini_") and call_id.endswith(f"_{index}"), call_id
        assert not ids(
            conn,
            "SELECT tc.id FROM tool_calls tc JOIN model_calls mc ON mc.id = tc.model_call_id WHERE mc.provider = 'ollama'",
        )
        ambient = s["habits"]["ambient_trace"]
        for mc, trace, port, domain in conn.execute(
            "SELECT mc.id, mc.trace_id, n.port, n.domain FROM model_calls mc JOIN net_events n ON n.trace_id = mc.trace_id AND n.path = mc.path WHERE mc.provider = 'ollama'"
        ):
            assert trace in ambient and port == 11434 and domain == "host.docker.internal", mc
        responses = conn.execute(
            "SELECT tr.model_call_id, tr.call_id FROM tool_responses tr JOIN model_calls mc ON mc.id = tr.model_call_id WHERE mc.provider = 'ollama' ORDER BY tr.id"
        ).fetchall()
        by_call: dict[int, list[str]] = {}
        for mc, call_id in responses:
            assert call_id.startswith("ollama_tool_result_"), call_id
            by_call.setdefault(mc, []).append(call_id)
        lists = list(by_call.values())
        for earlier, later in zip(lists, lists[1:], strict=False):
            if set(earlier) <= set(later) or len(later) < len(earlier):
                continue
            pytest.fail(f"results of earlier requests are not repeated: {earlier} {later}")
        assert (
            conn.execute(
                "SELECT count(*) FROM security_decision_events WHERE previous_decision IS NULL"
            ).fetchone()[0]
            == 0
        )
        for source, confidence in conn.execute(
            "SELECT source, confidence FROM substitution_events"
        ):
            assert source.startswith("http.header.") and confidence is None
    assert ("anthropic", "tool_use", "tools") in stops and ("chat", "tool_use", "tools") in stops
    assert ("google", "end_turn", "tools") in stops and ("openai", "end_turn", "tools") in stops
    assert not any(
        api in ("google", "openai", "ollama") and stop == "tool_use" for api, stop, _ in stops
    )


def test_truncated_blob_hash_covers_the_original(
    capsem_home: Path, manifest: dict, tmp_path: Path
) -> None:
    s = next(s for s in ledgers(manifest) if s["habits"].get("truncated_blobs"))
    conn = open_copy(capsem_home, s["ledger"], tmp_path)
    for rid in s["habits"]["truncated_blobs"]:
        stored, original, body, digest = conn.execute(
            "SELECT stored_bytes, original_bytes, body, body_hash FROM event_body_blobs WHERE id = ?",
            (rid,),
        ).fetchone()
        assert stored == len(body) == 10 * 1024 * 1024 < original
        assert digest != "blake3:" + blake3.blake3(body).hexdigest()


def test_legacy_run_rows_and_main_db_dates(
    capsem_home: Path, manifest: dict, tmp_path: Path
) -> None:
    main = open_copy(capsem_home, "sessions/main.db", tmp_path)
    zeroed = sessions_in(manifest, where=lambda s: s["habits"].get("legacy_run_zeros"))
    assert zeroed and all(s["counts"].get("model_calls") for s in zeroed)
    for mode, created in main.execute("SELECT mode, created_at FROM sessions"):
        if mode in ("persistent", "ephemeral"):
            assert created >= "2026-06-26", (mode, created)


def test_session_dirs_hold_what_capsem_leaves(capsem_home: Path, manifest: dict) -> None:
    for s in ledgers(manifest):
        directory = (capsem_home / s["ledger"]).parent
        if s["kind"] in ("legacy", "legacy_gz"):
            assert (directory / "capsem.log").is_file(), s["id"]
            continue
        for name in (
            "process.log",
            "serial.log",
            "pty.log",
            "mcp-aggregator.stderr.log",
            "machine_identifier",
            "vm/active_profile.toml",
            "auto_snapshots/0/metadata.json",
        ):
            assert (directory / name).is_file(), (s["id"], name)
        assert (directory / "workspace").is_symlink() and (directory / "guest").is_dir()
        for line in (directory / "process.log").read_text().splitlines():
            assert {"timestamp", "level", "target"} <= set(json.loads(line))
