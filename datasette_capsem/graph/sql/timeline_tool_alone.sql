-- The tool layer of a session's timeline in a file without model_calls to take times from.
SELECT {opt:tc.timestamp} AS at, 'tool' AS layer, tc.id AS row_id,
       COALESCE({opt:tc.tool_name}, '') || ' ' || COALESCE({opt:tc.arguments}, '') AS text,
       COALESCE({opt:tc.status}, {opt:tc.decision}) AS status, {opt:tc.duration_ms} AS duration_ms,
       {opt:tc.trace_id} AS trace_id, {opt:tc.event_id} AS event_id
FROM tool_calls AS tc
