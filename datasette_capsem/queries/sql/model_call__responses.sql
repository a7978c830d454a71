-- Responses to this call's tool calls: same call_id (and same trace when the file has one),
-- carried back by a later model call.
SELECT 3 AS role_rank, 'response that came back' AS role, 'tool_responses' AS table_name,
       t.id AS row_id, NULL AS time, t.call_id AS call_id,
       printf('carried by model call %s%s: %s', t.model_call_id,
              CASE WHEN t.is_error THEN ' (error)' ELSE '' END,
              substr(t.content_preview, 1, 120)) AS detail
FROM tool_responses AS t
WHERE EXISTS (
    SELECT 1 FROM tool_calls AS tc
    WHERE tc.model_call_id = :model_call_id
      AND tc.call_id = t.call_id
      AND {opt:tc.trace_id} IS {opt:t.trace_id}
)
