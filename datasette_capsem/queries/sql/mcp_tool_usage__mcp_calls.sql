SELECT 'mcp_calls' AS source, t.server_name, t.tool_name, {opt:t.duration_ms} AS duration_ms, {opt:t.bytes_sent} AS bytes_sent,
       {opt:t.bytes_received} AS bytes_received,
       CASE
           WHEN t.decision IN ('denied', 'blocked') THEN 'denied'
           WHEN t.decision = 'error' OR {opt:t.error_message} IS NOT NULL THEN 'error'
           ELSE 'ok'
       END AS outcome
FROM mcp_calls AS t
WHERE t.method = 'tools/call'
