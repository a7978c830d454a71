-- The fs layer of a session's timeline (session/timeline.py): one row per file event.
SELECT {opt:timestamp} AS at, 'fs' AS layer, id AS row_id,
       COALESCE({opt:action}, '') || ' ' || COALESCE({opt:path}, '') AS text,
       {opt:action} AS status, NULL AS duration_ms, {opt:trace_id} AS trace_id,
       {opt:event_id} AS event_id
FROM {table}
