-- datasette-capsem era 'v1_1': copied verbatim from capsem-ddl/session_1.1_2026-05-11.sql (Capsem's schema.rs DDL, Apache-2.0).
-- Capsem session.db DDL: 1.1 release ledger (policy_hook_events).
-- google/capsem crates/capsem-logger/src/schema.rs (CREATE_SCHEMA then migrate()) applied at: 3fb6366a94317a97ed3cabf4698ad27e45ace545.
-- Capsem is Apache-2.0. user_version 0, journal_mode WAL.
CREATE TABLE audit_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        pid INTEGER NOT NULL,
        ppid INTEGER NOT NULL,
        uid INTEGER NOT NULL,
        exe TEXT NOT NULL,
        comm TEXT,
        argv TEXT NOT NULL,
        cwd TEXT,
        exit_code INTEGER,
        session_id INTEGER,
        tty TEXT,
        audit_id TEXT,
        exec_event_id INTEGER,
        parent_exe TEXT,
        trace_id TEXT
    );
CREATE TABLE dns_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        qname TEXT NOT NULL,
        qtype INTEGER NOT NULL,
        qclass INTEGER NOT NULL,
        rcode INTEGER NOT NULL,
        decision TEXT NOT NULL,
        matched_rule TEXT,
        source_proto TEXT,
        process_name TEXT,
        upstream_resolver_ms INTEGER DEFAULT 0,
        trace_id TEXT,
        policy_mode TEXT,
        policy_action TEXT,
        policy_rule TEXT,
        policy_reason TEXT
    );
CREATE TABLE exec_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        exec_id INTEGER NOT NULL,
        command TEXT NOT NULL,
        exit_code INTEGER,
        duration_ms INTEGER,
        stdout_preview TEXT,
        stderr_preview TEXT,
        stdout_bytes INTEGER DEFAULT 0,
        stderr_bytes INTEGER DEFAULT 0,
        source TEXT NOT NULL DEFAULT 'api',
        mcp_call_id INTEGER,
        trace_id TEXT,
        process_name TEXT,
        pid INTEGER
    );
CREATE TABLE fs_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        action TEXT NOT NULL,
        path TEXT NOT NULL,
        size INTEGER,
        trace_id TEXT
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
        bytes_received INTEGER DEFAULT 0,
        policy_mode TEXT,
        policy_action TEXT,
        policy_rule TEXT,
        policy_reason TEXT,
        trace_id TEXT
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
        conn_type TEXT DEFAULT 'https',
        policy_mode TEXT,
        policy_action TEXT,
        policy_rule TEXT,
        policy_reason TEXT,
        trace_id TEXT
    );
CREATE TABLE policy_hook_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        endpoint_id TEXT NOT NULL,
        spec_version TEXT NOT NULL,
        spec_hash TEXT NOT NULL,
        decision_id TEXT,
        callback TEXT NOT NULL,
        decision TEXT,
        rule_id TEXT,
        reason TEXT,
        latency_ms INTEGER DEFAULT 0,
        status TEXT NOT NULL,
        error TEXT,
        fallback TEXT,
        audit_tags TEXT,
        trace_id TEXT,
        session_id TEXT
    );
CREATE TABLE snapshot_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp TEXT NOT NULL,
        slot INTEGER NOT NULL,
        origin TEXT NOT NULL,
        name TEXT,
        files_count INTEGER DEFAULT 0,
        start_fs_event_id INTEGER DEFAULT 0,
        stop_fs_event_id INTEGER DEFAULT 0,
        trace_id TEXT
    );
CREATE TABLE tool_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        model_call_id INTEGER NOT NULL,
        call_index INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        arguments TEXT,
        origin TEXT NOT NULL DEFAULT 'native',
        mcp_call_id INTEGER,
        trace_id TEXT
    );
CREATE TABLE tool_responses (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        model_call_id INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        content_preview TEXT,
        is_error INTEGER DEFAULT 0,
        trace_id TEXT
    );
CREATE INDEX idx_audit_events_exe
        ON audit_events(exe);
CREATE INDEX idx_audit_events_pid
        ON audit_events(pid);
CREATE INDEX idx_audit_events_ppid
        ON audit_events(ppid);
CREATE INDEX idx_audit_events_timestamp
        ON audit_events(timestamp);
CREATE INDEX idx_audit_events_trace_id ON audit_events(trace_id);
CREATE INDEX idx_dns_events_decision
        ON dns_events(decision);
CREATE INDEX idx_dns_events_policy_rule
        ON dns_events(policy_rule);
CREATE INDEX idx_dns_events_qname
        ON dns_events(qname);
CREATE INDEX idx_dns_events_timestamp
        ON dns_events(timestamp);
CREATE INDEX idx_dns_events_trace_id
        ON dns_events(trace_id);
CREATE INDEX idx_exec_events_exec_id
        ON exec_events(exec_id);
CREATE INDEX idx_exec_events_source
        ON exec_events(source);
CREATE INDEX idx_exec_events_timestamp
        ON exec_events(timestamp);
CREATE INDEX idx_exec_events_trace_id
        ON exec_events(trace_id);
CREATE INDEX idx_fs_events_path
        ON fs_events(path);
CREATE INDEX idx_fs_events_timestamp
        ON fs_events(timestamp);
CREATE INDEX idx_fs_events_trace_id ON fs_events(trace_id);
CREATE INDEX idx_mcp_calls_server
        ON mcp_calls(server_name);
CREATE INDEX idx_mcp_calls_timestamp
        ON mcp_calls(timestamp);
CREATE INDEX idx_mcp_calls_trace_id ON mcp_calls(trace_id);
CREATE INDEX idx_model_calls_provider_ts
        ON model_calls(provider, timestamp);
CREATE INDEX idx_model_calls_trace_id
        ON model_calls(trace_id);
CREATE INDEX idx_net_events_domain
        ON net_events(domain);
CREATE INDEX idx_net_events_timestamp
        ON net_events(timestamp);
CREATE INDEX idx_net_events_trace_id ON net_events(trace_id);
CREATE INDEX idx_policy_hook_events_decision_id
        ON policy_hook_events(decision_id);
CREATE INDEX idx_policy_hook_events_endpoint
        ON policy_hook_events(endpoint_id);
CREATE INDEX idx_policy_hook_events_timestamp
        ON policy_hook_events(timestamp);
CREATE INDEX idx_policy_hook_events_trace_id
        ON policy_hook_events(trace_id);
CREATE INDEX idx_snapshot_events_timestamp
        ON snapshot_events(timestamp);
CREATE INDEX idx_snapshot_events_trace_id ON snapshot_events(trace_id);
CREATE INDEX idx_tool_calls_call_id
        ON tool_calls(call_id);
CREATE INDEX idx_tool_calls_model_call
        ON tool_calls(model_call_id);
CREATE INDEX idx_tool_calls_trace_id ON tool_calls(trace_id);
CREATE INDEX idx_tool_responses_call_id
        ON tool_responses(call_id);
CREATE INDEX idx_tool_responses_model_call
        ON tool_responses(model_call_id);
CREATE INDEX idx_tool_responses_trace_id ON tool_responses(trace_id);
