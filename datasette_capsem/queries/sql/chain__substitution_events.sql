SELECT t.timestamp AS time, 'substitution_events' AS table_name, t.id AS row_id,
       {opt:t.event_id} AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       NULL AS model_call_id,
       printf('credential %s for %s (%s)', t.outcome, t.provider, t.source) AS summary
FROM substitution_events AS t
WHERE t.{key} = :{key}
