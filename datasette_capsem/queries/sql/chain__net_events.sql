SELECT t.timestamp AS time, 'net_events' AS table_name, t.id AS row_id,
       {opt:t.event_id} AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       NULL AS model_call_id,
       printf('%s %s%s -> %s %s', t.method, t.domain, t.path, t.status_code, t.decision) AS summary
FROM net_events AS t
WHERE t.{key} = :{key}
