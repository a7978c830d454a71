-- Tool responses of a file whose tool_responses has no key column (0.16 and older): those
-- carried by one of the chain's model calls, at the time of that call.
SELECT mc.timestamp AS time, 'tool_responses' AS table_name, t.id AS row_id,
       NULL AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       t.model_call_id AS model_call_id,
       printf('response to %s%s: %s', t.call_id,
              CASE WHEN t.is_error THEN ' (error)' ELSE '' END,
              substr(t.content_preview, 1, 80)) AS summary
FROM tool_responses AS t
JOIN model_calls AS mc ON mc.id = t.model_call_id
WHERE mc.{key} = :{key}
