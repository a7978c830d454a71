-- One row per tool call for counts and latency percentiles. Files before 2026-06-22 lack the
-- call's own timestamp, decision and duration: the day then comes from the model call.
SELECT tc.id AS row_id,
       {tool_name} AS tool_name,
       COALESCE({origin}, 'native') AS origin,
       {server_name} AS server_name,
       date(COALESCE(NULLIF({timestamp}, ''), mc.timestamp)) AS day,
       {duration_ms} AS duration_ms,
       {decision} AS decision,
       {status} AS status,
       (COALESCE({decision}, 'allowed') != 'allowed' OR COALESCE({status}, '') = 'error') AS failed
FROM tool_calls AS tc
LEFT JOIN model_calls AS mc ON mc.id = tc.model_call_id
WHERE {own}
