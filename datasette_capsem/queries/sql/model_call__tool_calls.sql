SELECT 2 AS role_rank, 'emitted tool call' AS role, 'tool_calls' AS table_name, t.id AS row_id,
       {opt:t.timestamp} AS time, t.call_id AS call_id,
       printf('%s tool %s(%s)', {opt:t.origin}, t.tool_name, substr(t.arguments, 1, 120)) AS detail
FROM tool_calls AS t
WHERE t.model_call_id = :model_call_id
