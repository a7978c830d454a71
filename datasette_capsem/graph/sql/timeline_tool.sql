-- The tool layer of a session's timeline (session/timeline.py): one row per tool call. An empty
-- timestamp (rows before 06-22) reads as the time of the model call that emitted it.
SELECT COALESCE(NULLIF({opt:tc.timestamp}, ''), mc."timestamp") AS at, 'tool' AS layer,
       tc.id AS row_id,
       COALESCE({opt:tc.tool_name}, '') || ' ' || COALESCE({opt:tc.arguments}, '') AS text,
       COALESCE({opt:tc.status}, {opt:tc.decision}) AS status, {opt:tc.duration_ms} AS duration_ms,
       {opt:tc.trace_id} AS trace_id, {opt:tc.event_id} AS event_id
FROM tool_calls AS tc
LEFT JOIN model_calls AS mc ON mc.id = tc.model_call_id
