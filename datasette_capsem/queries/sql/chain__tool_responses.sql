-- Tool responses tagged with the key, or carried by one of the chain's model calls.
-- tool_responses has no timestamp: a response takes the time of the model call that carried it.
SELECT mc.timestamp AS time, 'tool_responses' AS table_name, t.id AS row_id,
       NULL AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       t.model_call_id AS model_call_id,
       printf('response to %s%s: %s', t.call_id,
              CASE WHEN t.is_error THEN ' (error)' ELSE '' END,
              substr(t.content_preview, 1, 80)) AS summary
FROM tool_responses AS t
LEFT JOIN model_calls AS mc ON mc.id = t.model_call_id
WHERE t.{key} = :{key}
   OR t.model_call_id IN (SELECT id FROM model_calls WHERE {key} = :{key})
