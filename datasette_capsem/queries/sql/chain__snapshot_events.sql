SELECT t.timestamp AS time, 'snapshot_events' AS table_name, t.id AS row_id,
       NULL AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       NULL AS model_call_id,
       printf('snapshot slot %s (%s): %s files', t.slot, t.origin, t.files_count) AS summary
FROM snapshot_events AS t
WHERE t.{key} = :{key}
