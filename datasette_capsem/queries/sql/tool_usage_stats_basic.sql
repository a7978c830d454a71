-- Tool usage for files without durations: counts, and errors from tool_responses.is_error.
WITH failed_responses AS (
    SELECT DISTINCT tr.call_id, COALESCE({opt:tr.trace_id}, '') AS trace_key
    FROM tool_responses AS tr
    WHERE tr.is_error
),
calls AS (
    SELECT
        tc.tool_name,
        tc.origin,
        CASE WHEN (tc.call_id, COALESCE({opt:tc.trace_id}, '')) IN (SELECT call_id, trace_key FROM failed_responses)
             THEN 1 ELSE 0 END AS failed
    FROM tool_calls AS tc
)
SELECT
    tool_name,
    origin,
    COUNT(*) AS calls,
    SUM(1 - failed) AS ok,
    SUM(failed) AS errors,
    NULL AS p50_ms,
    NULL AS p90_ms,
    NULL AS p95_ms,
    NULL AS p99_ms
FROM calls
GROUP BY tool_name, origin
ORDER BY calls DESC, tool_name, origin
