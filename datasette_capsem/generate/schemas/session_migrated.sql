-- A persistent VM's session.db created by 1.2 (late May 2026) and re-opened by every writer
-- since (spec §4.5). Applied after session_v1_1.sql and before session_current.sql: first the
-- 1.2 additions (later dropped from Capsem's DDL but never from existing files), then the
-- additive migrate() steps. Columns added by ALTER are plain and nullable, so old rows keep
-- NULL event_ids, and column order differs from a fresh file.

CREATE TABLE session_identity (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    vm_id TEXT NOT NULL,
    profile_id TEXT,
    user_id TEXT,
    created_at TEXT NOT NULL
);

CREATE TABLE ai_model_interactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT,
    request_id TEXT,
    trace_id TEXT,
    status TEXT,
    duration_ms INTEGER DEFAULT 0
);

CREATE TABLE ai_content_blocks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    interaction_id INTEGER NOT NULL,
    role TEXT NOT NULL,
    block_index INTEGER NOT NULL,
    block_type TEXT NOT NULL,
    content TEXT
);

CREATE TABLE ai_model_tool_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    interaction_id INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    arguments TEXT
);

CREATE TABLE ai_model_tool_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    interaction_id INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    content TEXT,
    is_error INTEGER DEFAULT 0
);

CREATE TABLE ai_usage_details (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    interaction_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    value INTEGER NOT NULL
);

CREATE TABLE ai_mcp_execution_evidence (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    interaction_id INTEGER,
    mcp_call_id INTEGER,
    server_name TEXT,
    tool_name TEXT,
    evidence_json TEXT
);

CREATE TABLE security_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    event_type TEXT NOT NULL,
    subject TEXT,
    trace_id TEXT,
    payload_json TEXT
);

CREATE TABLE security_event_steps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    security_event_id INTEGER NOT NULL,
    step_index INTEGER NOT NULL,
    stage TEXT NOT NULL,
    decision TEXT,
    detail_json TEXT
);

CREATE TABLE security_event_links (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    security_event_id INTEGER NOT NULL,
    target_table TEXT NOT NULL,
    target_id INTEGER NOT NULL
);

CREATE TABLE detection_findings (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    security_event_id INTEGER,
    rule_id TEXT NOT NULL,
    level TEXT NOT NULL,
    summary TEXT
);

CREATE TABLE detection_finding_tags (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    finding_id INTEGER NOT NULL,
    tag TEXT NOT NULL
);

-- migrate(): snapshot_events is the one table Capsem explicitly drops.
DROP TABLE snapshot_events;

ALTER TABLE net_events ADD COLUMN event_id TEXT;
ALTER TABLE net_events ADD COLUMN credential_ref TEXT;
ALTER TABLE net_events ADD COLUMN turn_id TEXT;

ALTER TABLE model_calls ADD COLUMN event_id TEXT;
ALTER TABLE model_calls ADD COLUMN credential_ref TEXT;
ALTER TABLE model_calls ADD COLUMN protocol TEXT;
ALTER TABLE model_calls ADD COLUMN turn_id TEXT;

ALTER TABLE tool_responses ADD COLUMN credential_ref TEXT;
ALTER TABLE tool_responses ADD COLUMN turn_id TEXT;

ALTER TABLE fs_events ADD COLUMN event_id TEXT;
ALTER TABLE fs_events ADD COLUMN credential_ref TEXT;
ALTER TABLE fs_events ADD COLUMN directory TEXT;
ALTER TABLE fs_events ADD COLUMN name TEXT;
ALTER TABLE fs_events ADD COLUMN turn_id TEXT;

ALTER TABLE exec_events ADD COLUMN event_id TEXT;
ALTER TABLE exec_events ADD COLUMN credential_ref TEXT;
ALTER TABLE exec_events ADD COLUMN turn_id TEXT;

ALTER TABLE dns_events ADD COLUMN event_id TEXT;
ALTER TABLE dns_events ADD COLUMN credential_ref TEXT;
ALTER TABLE dns_events ADD COLUMN answer_ip TEXT;
ALTER TABLE dns_events ADD COLUMN turn_id TEXT;

ALTER TABLE audit_events ADD COLUMN event_id TEXT;
ALTER TABLE audit_events ADD COLUMN credential_ref TEXT;
ALTER TABLE audit_events ADD COLUMN turn_id TEXT;

ALTER TABLE mcp_calls ADD COLUMN event_id TEXT;
ALTER TABLE mcp_calls ADD COLUMN credential_ref TEXT;

-- tool_calls is rebuilt because model_call_id was NOT NULL; the rebuild drops mcp_call_id and
-- keeps the placeholder default the 06-12 migration gave event_id.
DROP TABLE tool_calls;
CREATE TABLE tool_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    model_call_id INTEGER,
    call_index INTEGER NOT NULL,
    call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    arguments TEXT,
    origin TEXT NOT NULL DEFAULT 'native',
    trace_id TEXT,
    event_id TEXT NOT NULL DEFAULT '000000000000',
    provider TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'observed' CHECK (status IN ('requested', 'observed', 'responded', 'error')),
    credential_ref TEXT,
    timestamp TEXT NOT NULL DEFAULT '',
    response_preview TEXT,
    server_name TEXT,
    method TEXT,
    request_id TEXT,
    decision TEXT NOT NULL DEFAULT 'allowed',
    duration_ms INTEGER DEFAULT 0,
    error_message TEXT,
    process_name TEXT,
    bytes_sent INTEGER DEFAULT 0,
    bytes_received INTEGER DEFAULT 0,
    policy_mode TEXT,
    policy_action TEXT,
    policy_rule TEXT,
    policy_reason TEXT,
    turn_id TEXT,
    transport TEXT NOT NULL DEFAULT 'unknown' CHECK (transport IN ('http', 'sse', 'websocket', 'vsock_frame', 'direct', 'unknown'))
);
