-- The net layer of a session's timeline (session/timeline.py): one row per HTTP request.
SELECT {opt:timestamp} AS at, 'net' AS layer, id AS row_id,
       COALESCE({opt:method}, 'CONNECT') || ' ' || COALESCE({opt:domain}, '') || COALESCE({opt:path}, '') AS text,
       COALESCE({opt:decision}, '') || COALESCE(' ' || {opt:status_code}, '') AS status,
       {opt:duration_ms} AS duration_ms, {opt:trace_id} AS trace_id, {opt:event_id} AS event_id
FROM {table}
