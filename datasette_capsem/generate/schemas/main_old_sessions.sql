-- main.db first created at user_version 2 (March 2026) and migrated additively up to 7
-- (spec §3.3): still carries total_mcp_calls, and the later columns sit at the end in the
-- order the migrations added them. The 'main_old' era is main_head_2026-08-22.sql with its
-- CREATE TABLE sessions replaced by this script (schema.py).

CREATE TABLE sessions (
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
    total_mcp_calls INTEGER NOT NULL DEFAULT 0,
    total_file_events INTEGER NOT NULL DEFAULT 0
);

-- v3
ALTER TABLE sessions ADD COLUMN compressed_size_bytes INTEGER;
ALTER TABLE sessions ADD COLUMN vacuumed_at TEXT;
-- v4
ALTER TABLE sessions ADD COLUMN storage_mode TEXT NOT NULL DEFAULT 'block';
ALTER TABLE sessions ADD COLUMN rootfs_hash TEXT;
ALTER TABLE sessions ADD COLUMN rootfs_version TEXT;
-- v5
ALTER TABLE sessions ADD COLUMN source_image TEXT;
ALTER TABLE sessions ADD COLUMN persistent BOOLEAN NOT NULL DEFAULT 0;
-- v6
ALTER TABLE sessions RENAME COLUMN source_image TO forked_from;
-- v7
ALTER TABLE sessions ADD COLUMN exec_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN audit_event_count INTEGER NOT NULL DEFAULT 0;

