SELECT t.timestamp AS time, 'exec_events' AS table_name, t.id AS row_id,
       {opt:t.event_id} AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       NULL AS model_call_id,
       printf('exec %s -> exit %s', t.command, t.exit_code) AS summary
FROM exec_events AS t
WHERE t.{key} = :{key}
