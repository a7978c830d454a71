-- mcp.tool_call security rows whose event_id names no ledgered MCP call (spec §6.2 #8): no
-- tool_calls row and, on files from 2026-06-06 to 06-24 that keep MCP traffic in mcp_calls
-- (with an event_id), no mcp_calls row either. Each lookup below is kept only when the file
-- has that table and its event_id column.
SELECT
    s.id,
    strftime('%Y-%m-%dT%H:%M:%fZ', s.timestamp_unix_ms / 1000.0, 'unixepoch') AS time,
    s.event_id,
    s.rule_id,
    s.rule_action,
    s.detection_level,
    s.trace_id
FROM security_rule_events AS s
WHERE s.event_type = 'mcp.tool_call'
  AND s.event_id NOT IN (
    {parts}
  )
ORDER BY s.id
