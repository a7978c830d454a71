-- mcp.tool_call security rows with no tool_calls row of the same event_id (spec §6.2 #8).
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
  AND s.event_id NOT IN (SELECT event_id FROM tool_calls WHERE event_id IS NOT NULL)
ORDER BY s.id
