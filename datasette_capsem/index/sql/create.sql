-- The cross-session index: facts derived from every on-disk session.db, rebuilt per ledger
-- when the ledger's size or mtime (or its WAL's) changes. Owned by the plugin, in its cache dir.

CREATE TABLE IF NOT EXISTS ledgers (
    session_id TEXT PRIMARY KEY,
    session_name TEXT,
    kind TEXT,
    ledger_path TEXT NOT NULL,
    era TEXT,
    size INTEGER,
    mtime_ns INTEGER,
    wal_size INTEGER,
    wal_mtime_ns INTEGER,
    indexed_at TEXT NOT NULL,
    index_ms REAL,
    problem TEXT
);

CREATE TABLE IF NOT EXISTS session_totals (
    session_id TEXT PRIMARY KEY,
    requests INTEGER,
    allowed_requests INTEGER,
    denied_requests INTEGER,
    error_requests INTEGER,
    model_calls INTEGER,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cache_read_tokens INTEGER,
    thinking_tokens INTEGER,
    cost_usd REAL,
    tool_calls INTEGER,
    mcp_calls INTEGER,
    file_events INTEGER,
    exec_events INTEGER,
    audit_events INTEGER,
    dns_queries INTEGER,
    first_event_at TEXT,
    last_event_at TEXT
);

CREATE TABLE IF NOT EXISTS model_usage (
    session_id TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    day TEXT,
    calls INTEGER,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cache_read_tokens INTEGER,
    thinking_tokens INTEGER,
    cost_usd REAL,
    duration_ms INTEGER
);
CREATE INDEX IF NOT EXISTS idx_model_usage_session ON model_usage(session_id);
CREATE INDEX IF NOT EXISTS idx_model_usage_day ON model_usage(day, provider);

CREATE TABLE IF NOT EXISTS tool_calls (
    session_id TEXT NOT NULL,
    source_table TEXT NOT NULL,
    row_id INTEGER,
    tool_name TEXT,
    origin TEXT,
    server_name TEXT,
    day TEXT,
    duration_ms INTEGER,
    decision TEXT,
    status TEXT,
    failed INTEGER
);
CREATE INDEX IF NOT EXISTS idx_tool_calls_session ON tool_calls(session_id);
CREATE INDEX IF NOT EXISTS idx_tool_calls_tool ON tool_calls(tool_name, duration_ms);

CREATE TABLE IF NOT EXISTS failing_domains (
    session_id TEXT NOT NULL,
    source TEXT NOT NULL,
    domain TEXT,
    requests INTEGER,
    denied INTEGER,
    errors INTEGER,
    status_4xx INTEGER,
    status_5xx INTEGER,
    last_seen TEXT
);
CREATE INDEX IF NOT EXISTS idx_failing_domains_session ON failing_domains(session_id);
CREATE INDEX IF NOT EXISTS idx_failing_domains_domain ON failing_domains(domain);

CREATE TABLE IF NOT EXISTS id_lookup (
    value TEXT NOT NULL,
    id_kind TEXT NOT NULL,
    session_id TEXT NOT NULL,
    table_name TEXT NOT NULL,
    row_id INTEGER
);
CREATE INDEX IF NOT EXISTS idx_id_lookup_value ON id_lookup(value);
CREATE INDEX IF NOT EXISTS idx_id_lookup_session ON id_lookup(session_id);

CREATE TABLE IF NOT EXISTS index_meta (
    key TEXT PRIMARY KEY,
    value TEXT
);
