-- datasette-capsem era 'v0_10': copied verbatim from capsem-ddl/session_0x_2026-03-13.sql (Capsem's schema.rs DDL, Apache-2.0).
-- Capsem session.db DDL: 0.x ledger after mcp_calls.bytes_* (0.10).
-- google/capsem crates/capsem-logger/src/schema.rs (CREATE_SCHEMA then migrate()) applied at: 642ba1e7d052b41e936288d0d2b37b017285afd8.
-- Capsem is Apache-2.0. user_version 0, journal_mode WAL.
CREATE TABLE fs_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        action TEXT NOT NULL,
        path TEXT NOT NULL,
        size INTEGER
    );
CREATE TABLE mcp_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        server_name TEXT NOT NULL,
        method TEXT NOT NULL,
        tool_name TEXT,
        request_id TEXT,
        request_preview TEXT,
        response_preview TEXT,
        decision TEXT NOT NULL,
        duration_ms INTEGER DEFAULT 0,
        error_message TEXT,
        process_name TEXT,
        bytes_sent INTEGER DEFAULT 0,
        bytes_received INTEGER DEFAULT 0
    );
CREATE TABLE model_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT,
        process_name TEXT,
        pid INTEGER,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        stream INTEGER DEFAULT 0,
        system_prompt_preview TEXT,
        messages_count INTEGER DEFAULT 0,
        tools_count INTEGER DEFAULT 0,
        request_bytes INTEGER DEFAULT 0,
        request_body_preview TEXT,
        message_id TEXT,
        status_code INTEGER,
        text_content TEXT,
        thinking_content TEXT,
        stop_reason TEXT,
        input_tokens INTEGER,
        output_tokens INTEGER,
        duration_ms INTEGER DEFAULT 0,
        response_bytes INTEGER DEFAULT 0,
        estimated_cost_usd REAL DEFAULT 0,
        trace_id TEXT,
        usage_details TEXT
    );
CREATE TABLE net_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        domain TEXT NOT NULL,
        port INTEGER DEFAULT 443,
        decision TEXT NOT NULL,
        process_name TEXT,
        pid INTEGER,
        method TEXT,
        path TEXT,
        query TEXT,
        status_code INTEGER,
        bytes_sent INTEGER DEFAULT 0,
        bytes_received INTEGER DEFAULT 0,
        duration_ms INTEGER DEFAULT 0,
        matched_rule TEXT,
        request_headers TEXT,
        response_headers TEXT,
        request_body_preview TEXT,
        response_body_preview TEXT,
        conn_type TEXT DEFAULT 'https'
    );
CREATE TABLE tool_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        model_call_id INTEGER NOT NULL,
        call_index INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        arguments TEXT,
        origin TEXT NOT NULL DEFAULT 'native',
        mcp_call_id INTEGER
    );
CREATE TABLE tool_responses (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        model_call_id INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        content_preview TEXT,
        is_error INTEGER DEFAULT 0
    );
CREATE INDEX idx_fs_events_path
        ON fs_events(path);
CREATE INDEX idx_fs_events_timestamp
        ON fs_events(timestamp);
CREATE INDEX idx_mcp_calls_server
        ON mcp_calls(server_name);
CREATE INDEX idx_mcp_calls_timestamp
        ON mcp_calls(timestamp);
CREATE INDEX idx_model_calls_provider_ts
        ON model_calls(provider, timestamp);
CREATE INDEX idx_model_calls_trace_id
        ON model_calls(trace_id);
CREATE INDEX idx_net_events_domain
        ON net_events(domain);
CREATE INDEX idx_net_events_timestamp
        ON net_events(timestamp);
CREATE INDEX idx_tool_calls_call_id
        ON tool_calls(call_id);
CREATE INDEX idx_tool_calls_model_call
        ON tool_calls(model_call_id);
CREATE INDEX idx_tool_responses_call_id
        ON tool_responses(call_id);
CREATE INDEX idx_tool_responses_model_call
        ON tool_responses(model_call_id);
