-- session.db as 1.1 wrote it (May 2026, spec §4.5): adds dns_events, exec_events, audit_events,
-- trace_id on most tables and policy_* columns; still no event_id, turn_id, model_items, body
-- blobs or security ledgers; MCP traffic still in mcp_calls.

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

CREATE TABLE snapshot_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    slot INTEGER NOT NULL,
    origin TEXT NOT NULL,
    name TEXT,
    files_count INTEGER DEFAULT 0,
    start_fs_event_id INTEGER,
    stop_fs_event_id INTEGER,
    trace_id TEXT
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

CREATE TABLE audit_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    timestamp TEXT NOT NULL,
    pid INTEGER NOT NULL,
    ppid INTEGER,
    uid INTEGER,
    exe TEXT,
    comm TEXT,
    argv TEXT,
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

CREATE INDEX idx_net_events_timestamp ON net_events(timestamp);
CREATE INDEX idx_net_events_domain ON net_events(domain);
CREATE INDEX idx_model_calls_timestamp ON model_calls(timestamp);
CREATE INDEX idx_model_calls_trace_id ON model_calls(trace_id);
CREATE INDEX idx_tool_calls_model_call ON tool_calls(model_call_id);
CREATE INDEX idx_tool_responses_model_call ON tool_responses(model_call_id);
CREATE INDEX idx_fs_events_timestamp ON fs_events(timestamp);
CREATE INDEX idx_mcp_calls_timestamp ON mcp_calls(timestamp);
CREATE INDEX idx_exec_events_exec_id ON exec_events(exec_id);
CREATE INDEX idx_dns_events_timestamp ON dns_events(timestamp);
