SELECT t.created_at AS time, 'event_body_blobs' AS table_name, t.id AS row_id,
       t.event_id AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       NULL AS model_call_id,
       printf('%s body of %s %s: %s bytes %s', t.direction, t.source_table, t.event_id,
              t.stored_bytes, t.content_type) AS summary
FROM event_body_blobs AS t
WHERE t.{key} = :{key}
