-- Tool calls tagged with the key, or emitted by one of the chain's model calls (an untagged
-- row still belongs). Files before 2026-06-22 have no tool_calls.timestamp (and migrated rows
-- hold ''): such a call takes the time of the model call that emitted it.
SELECT COALESCE(NULLIF({opt:t.timestamp}, ''), mc.timestamp) AS time, 'tool_calls' AS table_name,
       t.id AS row_id, {opt:t.event_id} AS event_id, {opt:t.trace_id} AS trace_id,
       {opt:t.turn_id} AS turn_id,
       t.model_call_id AS model_call_id,
       printf('%s tool %s(%s) call_id %s', {opt:t.origin}, t.tool_name, substr(t.arguments, 1, 80),
              t.call_id) AS summary
FROM tool_calls AS t
LEFT JOIN model_calls AS mc ON mc.id = t.model_call_id
WHERE t.{key} = :{key}
   OR t.model_call_id IN (SELECT id FROM model_calls WHERE {key} = :{key})
