-- The cross-session index: facts derived from every on-disk session.db, rebuilt per ledger
-- when the ledger's size or mtime (or its WAL's) changes. Owned by the plugin, in its cache dir.

-- session_id is the session's address: its id, or `<label>--<id>` with labelled homes, whose
-- label is `home` ('' for the one home of an unlabelled instance).
CREATE TABLE IF NOT EXISTS ledgers (
    session_id TEXT PRIMARY KEY,
    home TEXT NOT NULL DEFAULT '',
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
    problem TEXT,
    -- A fork (spec §1.3): the parent whose copied rows are left out of this session's facts,
    -- how many counted rows that was, and why they could not be left out (parent unreadable).
    -- parent_key is what the figures depend on; a change of it re-indexes the fork.
    inherited_from TEXT,
    inherited_rows INTEGER,
    inherited_problem TEXT,
    parent_key TEXT NOT NULL DEFAULT ''
);

-- Sessions that name a ledger file already indexed under another id (an upgraded persistent
-- VM's old, name-keyed id, spec §2.2): its facts live under owner_id, once.
CREATE TABLE IF NOT EXISTS ledger_aliases (
    session_id TEXT PRIMARY KEY,
    owner_id TEXT NOT NULL
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

-- A fork's whole-file totals, its parent's copied rows included: what main.db's rollup counts.
-- session_totals holds only the fork's own rows. Absent for a session that is not a fork.
CREATE TABLE IF NOT EXISTS file_totals (
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

-- Ids of the rows a fork copied from its parent (spec §1.3). id_lookup holds each of them
-- once, under the parent; these say where else the same row occurs, so a lookup still finds
-- every file holding an id, as a scan of the files would.
CREATE TABLE IF NOT EXISTS copied_ids (
    value TEXT NOT NULL,
    id_kind TEXT NOT NULL,
    session_id TEXT NOT NULL,
    table_name TEXT NOT NULL,
    row_id INTEGER
);
CREATE INDEX IF NOT EXISTS idx_copied_ids_value ON copied_ids(value);
CREATE INDEX IF NOT EXISTS idx_copied_ids_session ON copied_ids(session_id);

CREATE TABLE IF NOT EXISTS index_meta (
    key TEXT PRIMARY KEY,
    value TEXT
);

-- Full-text search (index/text.py): one document per searchable ledger row, its text masked
-- by the credential policy before it is stored (the index is shared by every actor). A
-- fork's copied rows are indexed once, for the parent.
CREATE TABLE IF NOT EXISTS text_rows (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    table_name TEXT NOT NULL,
    row_id INTEGER,
    event_id TEXT,
    trace_id TEXT,
    model_call_id INTEGER,
    provider TEXT,
    model TEXT,
    at TEXT,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_text_rows_session ON text_rows(session_id);
CREATE VIRTUAL TABLE IF NOT EXISTS text_search USING fts5(
    body,
    content = 'text_rows',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);

-- The quick check profile's verdict of every catalog session (with or without a ledger),
-- computed by the refresh, never on request. ledger_size..ledger_wal_mtime_ns and row_sig say
-- what it was computed from: the ledger file's stat fingerprint (NULLs without a ledger) and
-- a digest of the session's main.db row, status and liveness. A session whose current values
-- differ is re-checked by the next refresh; until then the list marks its verdict stale.
CREATE TABLE IF NOT EXISTS session_checks (
    session_id TEXT PRIMARY KEY,
    home TEXT NOT NULL DEFAULT '',
    session_name TEXT,
    kind TEXT,
    created_at TEXT,
    profile TEXT NOT NULL,
    verdict TEXT NOT NULL,          -- error, warning, ok, or unreadable
    errors INTEGER NOT NULL,        -- findings with offending rows, per severity
    warnings INTEGER NOT NULL,
    infos INTEGER NOT NULL,
    problem TEXT,                   -- why the ledger could not be checked
    era TEXT,
    checked_at TEXT NOT NULL,
    check_ms REAL,
    ledger_size INTEGER,
    ledger_mtime_ns INTEGER,
    ledger_wal_size INTEGER,
    ledger_wal_mtime_ns INTEGER,
    row_sig TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_session_checks_verdict ON session_checks(verdict);

-- Every finding with offending rows of those checks: one row per (session, check, table).
CREATE TABLE IF NOT EXISTS session_findings (
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    severity TEXT NOT NULL,
    title TEXT,
    check_id TEXT,
    table_name TEXT,
    row_count INTEGER NOT NULL,
    row_ids TEXT,                   -- JSON array: a sample of the offending row ids
    failed TEXT
);
CREATE INDEX IF NOT EXISTS idx_session_findings_session ON session_findings(session_id);
CREATE INDEX IF NOT EXISTS idx_session_findings_kind ON session_findings(kind, severity);

-- What policy stopped or flagged, per session, day and subject (index/extract.py): denied
-- domains (HTTP and DNS), blocked tools, security detections (detection level above none) and
-- credential broker events. A fork's rows copied from its parent are counted once, for the
-- parent. Queried by /-/capsem/security and with SQL.
CREATE TABLE IF NOT EXISTS policy_events (
    session_id TEXT NOT NULL,
    category TEXT NOT NULL,         -- denied_domain, blocked_tool, detection, credential
    source_table TEXT NOT NULL,
    day TEXT,                       -- YYYY-MM-DD (UTC)
    subject TEXT,                   -- domain or DNS name, tool name, rule id, provider
    detail TEXT,                    -- http/dns, the rule or decision, detection level, outcome
    events INTEGER NOT NULL,
    first_at TEXT,
    last_at TEXT
);
CREATE INDEX IF NOT EXISTS idx_policy_events_session ON policy_events(session_id);
CREATE INDEX IF NOT EXISTS idx_policy_events_day ON policy_events(day, category);
