-- A recursive arm of trace_chain.sql: event_body_blobs rows whose event_id names one of the
-- chain's own rows of a primary table (a well-formed event id, not the migration
-- placeholder). The list of primary tables is graph/trace_rows.py's PRIMARY_TABLES.
SELECT t.created_at AS time, 'event_body_blobs' AS table_name, t.id AS row_id,
       t.event_id AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       c.model_call_id AS model_call_id,
       printf('%s body of %s %s: %s bytes %s', t.direction, t.source_table, t.event_id,
              t.stored_bytes, t.content_type) AS summary
FROM chain AS c
JOIN event_body_blobs AS t ON t.event_id = c.event_id
WHERE c.table_name IN ('model_calls', 'tool_calls', 'model_items', 'net_events', 'dns_events',
                       'fs_events', 'exec_events', 'audit_events', 'substitution_events',
                       'mcp_calls')
  AND typeof(c.event_id) = 'text' AND length(c.event_id) = 12
  AND c.event_id NOT GLOB '*[^0-9a-f]*' AND c.event_id <> '000000000000'
