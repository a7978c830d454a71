-- One row per tool call for counts and latency percentiles. Files before 2026-06-22 lack the
-- call's own timestamp, decision and duration: the day then comes from the model call.
SELECT tc.id AS row_id,
       {opt:tool_name} AS tool_name,
       COALESCE({opt:origin}, 'native') AS origin,
       {opt:server_name} AS server_name,
       date(COALESCE(NULLIF({opt:timestamp}, ''), mc.timestamp)) AS day,
       {opt:duration_ms} AS duration_ms,
       {opt:decision} AS decision,
       {opt:status} AS status,
       (COALESCE({opt:decision}, 'allowed') != 'allowed' OR COALESCE({opt:status}, '') = 'error') AS failed
FROM tool_calls AS tc
LEFT JOIN model_calls AS mc ON mc.id = tc.model_call_id
WHERE {own}
