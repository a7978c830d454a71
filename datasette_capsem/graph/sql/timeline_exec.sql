-- The exec layer of a session's timeline (session/timeline.py): one row per command.
SELECT {opt:timestamp} AS at, 'exec' AS layer, id AS row_id, {opt:command} AS text,
       CASE WHEN {opt:exit_code} IS NULL THEN 'running' ELSE 'exit ' || {opt:exit_code} END AS status,
       {opt:duration_ms} AS duration_ms, {opt:trace_id} AS trace_id, {opt:event_id} AS event_id
FROM {table}
