-- A recursive arm of trace_chain.sql: security_decision_events rows whose event_id names one of the
-- chain's own rows of a primary table (a well-formed event id, not the migration
-- placeholder). The list of primary tables is graph/trace_rows.py's PRIMARY_TABLES.
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', t.timestamp_unix_ms / 1000.0, 'unixepoch') AS time,
       'security_decision_events' AS table_name, t.id AS row_id, t.event_id AS event_id,
       {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       c.model_call_id AS model_call_id,
       printf('decision at %s by %s: %s on %s %s', t.stage, t.actor, t.effective_decision,
              t.event_type, t.event_id) AS summary
FROM chain AS c
JOIN security_decision_events AS t ON t.event_id = c.event_id
WHERE c.table_name IN ('model_calls', 'tool_calls', 'model_items', 'net_events', 'dns_events',
                       'fs_events', 'exec_events', 'audit_events', 'substitution_events',
                       'mcp_calls')
  AND typeof(c.event_id) = 'text' AND length(c.event_id) = 12
  AND c.event_id NOT GLOB '*[^0-9a-f]*' AND c.event_id <> '000000000000'
