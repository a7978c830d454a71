-- main.db session index at HEAD (spec §3.2): user_version 7, created after 2026-06-24 so it has
-- no total_mcp_calls. The service also runs the session-ledger DDL against main.db
-- (session_current.sql is applied after this file).

CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    mode TEXT NOT NULL,
    command TEXT,
    status TEXT NOT NULL DEFAULT 'running',
    created_at TEXT NOT NULL,
    stopped_at TEXT,
    scratch_disk_size_gb INTEGER NOT NULL DEFAULT 16,
    ram_bytes INTEGER NOT NULL DEFAULT 4294967296,
    total_requests INTEGER NOT NULL DEFAULT 0,
    allowed_requests INTEGER NOT NULL DEFAULT 0,
    denied_requests INTEGER NOT NULL DEFAULT 0,
    total_input_tokens INTEGER NOT NULL DEFAULT 0,
    total_output_tokens INTEGER NOT NULL DEFAULT 0,
    total_estimated_cost REAL NOT NULL DEFAULT 0.0,
    total_tool_calls INTEGER NOT NULL DEFAULT 0,
    total_file_events INTEGER NOT NULL DEFAULT 0,
    compressed_size_bytes INTEGER,
    vacuumed_at TEXT,
    storage_mode TEXT NOT NULL DEFAULT 'block',
    rootfs_hash TEXT,
    rootfs_version TEXT,
    forked_from TEXT,
    persistent BOOLEAN NOT NULL DEFAULT 0,
    exec_count INTEGER NOT NULL DEFAULT 0,
    audit_event_count INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX IF NOT EXISTS idx_sessions_created ON sessions(created_at);
CREATE INDEX IF NOT EXISTS idx_sessions_status ON sessions(status);

CREATE TABLE IF NOT EXISTS ai_usage (
    session_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    call_count INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    estimated_cost REAL NOT NULL DEFAULT 0.0,
    total_duration_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, provider)
);

CREATE TABLE IF NOT EXISTS tool_usage (
    session_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    call_count INTEGER NOT NULL DEFAULT 0,
    total_bytes INTEGER NOT NULL DEFAULT 0,
    total_duration_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, tool_name)
);

CREATE TABLE IF NOT EXISTS mcp_usage (
    session_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    server_name TEXT NOT NULL,
    call_count INTEGER NOT NULL DEFAULT 0,
    total_bytes INTEGER NOT NULL DEFAULT 0,
    total_duration_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, tool_name)
);

PRAGMA user_version = 7;
