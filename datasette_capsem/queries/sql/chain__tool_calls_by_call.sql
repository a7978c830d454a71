-- Tool calls of a file whose tool_calls has no key column (0.16 and older): those emitted by
-- one of the chain's model calls, at the time of that call.
SELECT COALESCE(NULLIF({opt:t.timestamp}, ''), mc.timestamp) AS time, 'tool_calls' AS table_name,
       t.id AS row_id, {opt:t.event_id} AS event_id, {opt:t.trace_id} AS trace_id,
       {opt:t.turn_id} AS turn_id,
       t.model_call_id AS model_call_id,
       printf('%s tool %s(%s) call_id %s', {opt:t.origin}, t.tool_name, substr(t.arguments, 1, 80),
              t.call_id) AS summary
FROM tool_calls AS t
JOIN model_calls AS mc ON mc.id = t.model_call_id
WHERE mc.{key} = :{key}
