SELECT 'mcp_calls' AS source, t.server_name, t.tool_name, t.duration_ms, t.bytes_sent,
       t.bytes_received,
       CASE
           WHEN t.decision IN ('denied', 'blocked') THEN 'denied'
           WHEN t.decision = 'error' OR t.error_message IS NOT NULL THEN 'error'
           ELSE 'ok'
       END AS outcome
FROM mcp_calls AS t
WHERE t.method = 'tools/call'
