SELECT t.timestamp AS time, 'mcp_calls' AS table_name, t.id AS row_id,
       {opt:t.event_id} AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       NULL AS model_call_id,
       printf('mcp %s %s.%s -> %s', t.method, t.server_name, t.tool_name, t.decision) AS summary
FROM mcp_calls AS t
WHERE t.{key} = :{key}
