-- datasette-capsem era 'current': copied verbatim from capsem-ddl/session_head_2026-08-22.sql (Capsem's schema.rs DDL, Apache-2.0).
-- Capsem session.db DDL: current ledger, created by the HEAD writer.
-- google/capsem crates/capsem-logger/src/schema.rs (CREATE_SCHEMA then migrate()) applied at: 4337ec3248ba9b7ffac6a666763af824d99c7c0e.
-- Capsem is Apache-2.0. user_version 0, journal_mode WAL.
CREATE TABLE audit_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
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
        trace_id TEXT,
        turn_id TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE dns_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        timestamp TEXT NOT NULL,
        qname TEXT NOT NULL,
        qtype INTEGER NOT NULL,
        qclass INTEGER NOT NULL,
        rcode INTEGER NOT NULL,
        answer_ip TEXT,
        decision TEXT NOT NULL,
        matched_rule TEXT,
        source_proto TEXT,
        process_name TEXT,
        upstream_resolver_ms INTEGER DEFAULT 0,
        trace_id TEXT,
        turn_id TEXT,
        policy_mode TEXT,
        policy_action TEXT,
        policy_rule TEXT,
        policy_reason TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE event_body_blobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        event_type TEXT NOT NULL CHECK (event_type IN ('http.request', 'model.call', 'mcp.tool_call', 'mcp.tool_list', 'mcp.event', 'dns.query', 'file.event', 'file.import', 'file.export', 'process.exec', 'process.exec_complete', 'process.audit', 'credential.substitution', 'security.rule', 'security.ask')),
        source_table TEXT NOT NULL CHECK (source_table IN ('net_events', 'model_calls', 'tool_calls')),
        direction TEXT NOT NULL CHECK (direction IN ('request', 'response')),
        content_type TEXT,
        original_bytes INTEGER NOT NULL CHECK (original_bytes >= 0),
        stored_bytes INTEGER NOT NULL CHECK (stored_bytes >= 0 AND stored_bytes <= original_bytes),
        truncated INTEGER NOT NULL CHECK (truncated IN (0, 1)),
        body_hash TEXT NOT NULL CHECK (length(body_hash) = 71 AND body_hash GLOB 'blake3:[0-9a-f]*'),
        body BLOB NOT NULL,
        trace_id TEXT,
        turn_id TEXT,
        created_at TEXT NOT NULL,
        UNIQUE(event_id, source_table, direction)
    );
CREATE TABLE exec_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
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
        trace_id TEXT,
        turn_id TEXT,
        process_name TEXT,
        pid INTEGER,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE fs_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        timestamp TEXT NOT NULL,
        action TEXT NOT NULL,
        path TEXT NOT NULL,
        directory TEXT,
        name TEXT,
        size INTEGER,
        trace_id TEXT,
        turn_id TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE model_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        timestamp TEXT NOT NULL,
        provider TEXT NOT NULL,
        protocol TEXT CHECK (protocol IS NULL OR protocol IN ('anthropic', 'openai', 'google', 'ollama')),
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
        turn_id TEXT,
        usage_details TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE model_items (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        model_call_id INTEGER NOT NULL,
        timestamp TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT,
        path TEXT NOT NULL,
        trace_id TEXT,
        turn_id TEXT,
        kind TEXT NOT NULL CHECK (kind IN ('request', 'reasoning', 'response', 'tool_call', 'tool_response')),
        item_index INTEGER NOT NULL,
        call_id TEXT NOT NULL DEFAULT '',
        tool_name TEXT,
        arguments TEXT,
        content TEXT,
        content_hash TEXT NOT NULL CHECK (length(content_hash) = 71 AND content_hash GLOB 'blake3:[0-9a-f]*'),
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*')),
        UNIQUE(trace_id, kind, content_hash, call_id)
    );
CREATE TABLE net_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
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
        trace_id TEXT,
        turn_id TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE profile_mutation_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp_unix_ms INTEGER NOT NULL,
        mutation_id TEXT NOT NULL CHECK (length(mutation_id) = 12 AND mutation_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        profile_id TEXT NOT NULL,
        actor TEXT NOT NULL,
        category TEXT NOT NULL,
        filename TEXT NOT NULL,
        affected_path TEXT NOT NULL,
        target_kind TEXT NOT NULL,
        target_key TEXT NOT NULL,
        operation TEXT NOT NULL,
        rule_id TEXT,
        old_hash TEXT NOT NULL CHECK (length(old_hash) = 71 AND old_hash GLOB 'blake3:[0-9a-f]*'),
        old_size INTEGER NOT NULL,
        new_hash TEXT NOT NULL CHECK (length(new_hash) = 71 AND new_hash GLOB 'blake3:[0-9a-f]*'),
        new_size INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('applied', 'failed')),
        error TEXT,
        trace_id TEXT
    );
CREATE TABLE security_ask_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp_unix_ms INTEGER NOT NULL,
        ask_id TEXT NOT NULL CHECK (length(ask_id) = 12 AND ask_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        event_id TEXT NOT NULL CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        event_type TEXT NOT NULL CHECK (event_type IN ('http.request', 'model.call', 'mcp.tool_call', 'mcp.tool_list', 'mcp.event', 'dns.query', 'file.event', 'file.import', 'file.export', 'process.exec', 'process.exec_complete', 'process.audit', 'credential.substitution', 'security.rule', 'security.ask')),
        rule_id TEXT NOT NULL,
        rule_name TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied')),
        rule_json TEXT NOT NULL CHECK (json_valid(rule_json)),
        event_json TEXT NOT NULL CHECK (json_valid(event_json)),
        resolver TEXT,
        reason TEXT,
        trace_id TEXT,
        turn_id TEXT
    );
CREATE TABLE security_decision_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp_unix_ms INTEGER NOT NULL,
        event_id TEXT NOT NULL CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        event_type TEXT NOT NULL CHECK (event_type IN ('http.request', 'model.call', 'mcp.tool_call', 'mcp.tool_list', 'mcp.event', 'dns.query', 'file.event', 'file.import', 'file.export', 'process.exec', 'process.exec_complete', 'process.audit', 'credential.substitution', 'security.rule', 'security.ask')),
        stage TEXT NOT NULL CHECK (stage IN ('preprocess', 'rule', 'rewrite', 'postprocess', 'ask_resolution')),
        actor TEXT NOT NULL,
        rule_id TEXT,
        plugin_id TEXT,
        previous_decision TEXT NOT NULL CHECK (previous_decision IN ('allow', 'ask', 'block')),
        requested_decision TEXT NOT NULL CHECK (requested_decision IN ('allow', 'ask', 'block')),
        effective_decision TEXT NOT NULL CHECK (effective_decision IN ('allow', 'ask', 'block')),
        reason TEXT,
        event_json TEXT NOT NULL CHECK (json_valid(event_json)),
        trace_id TEXT,
        turn_id TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE security_rule_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        timestamp_unix_ms INTEGER NOT NULL,
        event_id TEXT NOT NULL CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        event_type TEXT NOT NULL CHECK (event_type IN ('http.request', 'model.call', 'mcp.tool_call', 'mcp.tool_list', 'mcp.event', 'dns.query', 'file.event', 'file.import', 'file.export', 'process.exec', 'process.exec_complete', 'process.audit', 'credential.substitution', 'security.rule', 'security.ask')),
        rule_id TEXT NOT NULL,
        rule_action TEXT NOT NULL CHECK (rule_action IN ('allow', 'ask', 'block', 'preprocess', 'rewrite', 'postprocess')),
        detection_level TEXT NOT NULL DEFAULT 'none' CHECK (detection_level IN ('none', 'informational', 'low', 'medium', 'high', 'critical')),
        rule_json TEXT NOT NULL CHECK (json_valid(rule_json)),
        event_json TEXT NOT NULL CHECK (json_valid(event_json)),
        trace_id TEXT,
        turn_id TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE substitution_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        timestamp TEXT NOT NULL,
        material_class TEXT NOT NULL,
        source TEXT NOT NULL,
        event_type TEXT,
        algorithm TEXT NOT NULL,
        substitution_ref TEXT NOT NULL CHECK (length(substitution_ref) = 82 AND substitution_ref GLOB 'credential:blake3:[0-9a-f]*'),
        outcome TEXT NOT NULL CHECK (outcome IN ('captured', 'brokered', 'injected', 'error')),
        provider TEXT,
        confidence REAL,
        trace_id TEXT,
        turn_id TEXT,
        context_json TEXT
    );
CREATE TABLE tool_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id TEXT NOT NULL DEFAULT (lower(hex(randomblob(6)))) CHECK (length(event_id) = 12 AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
        timestamp TEXT NOT NULL DEFAULT '',
        model_call_id INTEGER,
        provider TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'observed' CHECK (status IN ('requested', 'observed', 'responded', 'error')),
        call_index INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        arguments TEXT,
        response_preview TEXT,
        origin TEXT NOT NULL DEFAULT 'native',
        transport TEXT NOT NULL DEFAULT 'unknown' CHECK (transport IN ('http', 'sse', 'websocket', 'vsock_frame', 'direct', 'unknown')),
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
        trace_id TEXT,
        turn_id TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE TABLE tool_responses (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        model_call_id INTEGER NOT NULL,
        call_id TEXT NOT NULL,
        content_preview TEXT,
        is_error INTEGER DEFAULT 0,
        trace_id TEXT,
        turn_id TEXT,
        credential_ref TEXT CHECK (credential_ref IS NULL OR (length(credential_ref) = 82 AND credential_ref GLOB 'credential:blake3:[0-9a-f]*'))
    );
CREATE INDEX idx_audit_events_credential_ref ON audit_events(credential_ref);
CREATE INDEX idx_audit_events_event_id ON audit_events(event_id);
CREATE INDEX idx_audit_events_exe
        ON audit_events(exe);
CREATE INDEX idx_audit_events_pid
        ON audit_events(pid);
CREATE INDEX idx_audit_events_ppid
        ON audit_events(ppid);
CREATE INDEX idx_audit_events_timestamp
        ON audit_events(timestamp);
CREATE INDEX idx_audit_events_trace_id ON audit_events(trace_id);
CREATE INDEX idx_audit_events_turn_id ON audit_events(turn_id);
CREATE INDEX idx_dns_events_credential_ref ON dns_events(credential_ref);
CREATE INDEX idx_dns_events_decision
        ON dns_events(decision);
CREATE INDEX idx_dns_events_event_id ON dns_events(event_id);
CREATE INDEX idx_dns_events_policy_rule
        ON dns_events(policy_rule);
CREATE INDEX idx_dns_events_qname
        ON dns_events(qname);
CREATE INDEX idx_dns_events_timestamp
        ON dns_events(timestamp);
CREATE INDEX idx_dns_events_trace_id
        ON dns_events(trace_id);
CREATE INDEX idx_dns_events_turn_id ON dns_events(turn_id);
CREATE INDEX idx_event_body_blobs_event_id
        ON event_body_blobs(event_id);
CREATE INDEX idx_event_body_blobs_hash
        ON event_body_blobs(body_hash);
CREATE INDEX idx_event_body_blobs_trace_id
        ON event_body_blobs(trace_id);
CREATE INDEX idx_event_body_blobs_turn_id ON event_body_blobs(turn_id);
CREATE INDEX idx_exec_events_credential_ref ON exec_events(credential_ref);
CREATE INDEX idx_exec_events_event_id ON exec_events(event_id);
CREATE INDEX idx_exec_events_exec_id
        ON exec_events(exec_id);
CREATE INDEX idx_exec_events_source
        ON exec_events(source);
CREATE INDEX idx_exec_events_timestamp
        ON exec_events(timestamp);
CREATE INDEX idx_exec_events_trace_id
        ON exec_events(trace_id);
CREATE INDEX idx_exec_events_turn_id ON exec_events(turn_id);
CREATE INDEX idx_fs_events_credential_ref ON fs_events(credential_ref);
CREATE INDEX idx_fs_events_event_id ON fs_events(event_id);
CREATE INDEX idx_fs_events_path
        ON fs_events(path);
CREATE INDEX idx_fs_events_timestamp
        ON fs_events(timestamp);
CREATE INDEX idx_fs_events_trace_id ON fs_events(trace_id);
CREATE INDEX idx_fs_events_turn_id ON fs_events(turn_id);
CREATE INDEX idx_model_calls_credential_ref ON model_calls(credential_ref);
CREATE INDEX idx_model_calls_event_id ON model_calls(event_id);
CREATE INDEX idx_model_calls_provider_ts
        ON model_calls(provider, timestamp);
CREATE INDEX idx_model_calls_trace_id
        ON model_calls(trace_id);
CREATE INDEX idx_model_calls_turn_id ON model_calls(turn_id);
CREATE INDEX idx_model_items_call_id
        ON model_items(call_id);
CREATE INDEX idx_model_items_provider_path_model
        ON model_items(provider, path, model);
CREATE INDEX idx_model_items_trace_id
        ON model_items(trace_id);
CREATE INDEX idx_model_items_turn_id ON model_items(turn_id);
CREATE INDEX idx_net_events_credential_ref ON net_events(credential_ref);
CREATE INDEX idx_net_events_domain
        ON net_events(domain);
CREATE INDEX idx_net_events_event_id ON net_events(event_id);
CREATE INDEX idx_net_events_timestamp
        ON net_events(timestamp);
CREATE INDEX idx_net_events_trace_id ON net_events(trace_id);
CREATE INDEX idx_net_events_turn_id ON net_events(turn_id);
CREATE INDEX idx_profile_mutation_events_profile
        ON profile_mutation_events(profile_id);
CREATE INDEX idx_profile_mutation_events_target
        ON profile_mutation_events(category, target_kind, target_key);
CREATE INDEX idx_profile_mutation_events_timestamp
        ON profile_mutation_events(timestamp_unix_ms);
CREATE INDEX idx_security_ask_events_ask_id
        ON security_ask_events(ask_id);
CREATE INDEX idx_security_ask_events_event_id
        ON security_ask_events(event_id);
CREATE INDEX idx_security_ask_events_rule_id
        ON security_ask_events(rule_id);
CREATE INDEX idx_security_ask_events_timestamp
        ON security_ask_events(timestamp_unix_ms);
CREATE INDEX idx_security_ask_events_turn_id ON security_ask_events(turn_id);
CREATE INDEX idx_security_decision_events_actor
        ON security_decision_events(actor);
CREATE INDEX idx_security_decision_events_credential_ref ON security_decision_events(credential_ref);
CREATE INDEX idx_security_decision_events_event_id
        ON security_decision_events(event_id);
CREATE INDEX idx_security_decision_events_timestamp
        ON security_decision_events(timestamp_unix_ms);
CREATE INDEX idx_security_decision_events_turn_id ON security_decision_events(turn_id);
CREATE INDEX idx_security_rule_events_credential_ref ON security_rule_events(credential_ref);
CREATE INDEX idx_security_rule_events_event_id
        ON security_rule_events(event_id);
CREATE INDEX idx_security_rule_events_event_type
        ON security_rule_events(event_type);
CREATE INDEX idx_security_rule_events_rule_id
        ON security_rule_events(rule_id);
CREATE INDEX idx_security_rule_events_timestamp
        ON security_rule_events(timestamp_unix_ms);
CREATE INDEX idx_security_rule_events_turn_id ON security_rule_events(turn_id);
CREATE INDEX idx_substitution_events_event_id ON substitution_events(event_id);
CREATE INDEX idx_substitution_events_material
        ON substitution_events(material_class);
CREATE INDEX idx_substitution_events_ref
        ON substitution_events(substitution_ref);
CREATE INDEX idx_substitution_events_timestamp
        ON substitution_events(timestamp);
CREATE INDEX idx_substitution_events_turn_id ON substitution_events(turn_id);
CREATE INDEX idx_tool_calls_call_id
        ON tool_calls(call_id);
CREATE INDEX idx_tool_calls_model_call
        ON tool_calls(model_call_id);
CREATE INDEX idx_tool_calls_trace_id ON tool_calls(trace_id);
CREATE INDEX idx_tool_calls_turn_id ON tool_calls(turn_id);
CREATE INDEX idx_tool_responses_call_id
        ON tool_responses(call_id);
CREATE INDEX idx_tool_responses_credential_ref ON tool_responses(credential_ref);
CREATE INDEX idx_tool_responses_model_call
        ON tool_responses(model_call_id);
CREATE INDEX idx_tool_responses_trace_id ON tool_responses(trace_id);
CREATE INDEX idx_tool_responses_turn_id ON tool_responses(turn_id);
