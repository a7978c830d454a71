-- Tool usage with nearest-rank percentiles. SQLite has no percentile function, so each
-- duration gets its rank within its (tool, origin) group and the group size; the p-th
-- percentile is the value whose rank is ceil(p * n / 100) = (p * n + 99) / 100 in integers.
WITH failed_responses AS (
    SELECT DISTINCT call_id, COALESCE(trace_id, '') AS trace_key
    FROM tool_responses
    WHERE is_error
),
calls AS (
    SELECT
        tc.tool_name,
        tc.origin,
        tc.duration_ms,
        CASE
            WHEN tc.decision IN ('denied', 'blocked', 'error') OR tc.status = 'error'
                 OR tc.error_message IS NOT NULL
                 OR (tc.call_id, COALESCE(tc.trace_id, '')) IN (SELECT call_id, trace_key FROM failed_responses)
            THEN 1 ELSE 0
        END AS failed
    FROM tool_calls AS tc
),
ranked AS (
    SELECT
        tool_name,
        origin,
        duration_ms,
        ROW_NUMBER() OVER (PARTITION BY tool_name, origin ORDER BY duration_ms) AS rank,
        COUNT(*) OVER (PARTITION BY tool_name, origin) AS n
    FROM calls
    WHERE duration_ms IS NOT NULL
),
percentiles AS (
    SELECT
        tool_name,
        origin,
        MAX(CASE WHEN rank = (50 * n + 99) / 100 THEN duration_ms END) AS p50_ms,
        MAX(CASE WHEN rank = (90 * n + 99) / 100 THEN duration_ms END) AS p90_ms,
        MAX(CASE WHEN rank = (95 * n + 99) / 100 THEN duration_ms END) AS p95_ms,
        MAX(CASE WHEN rank = (99 * n + 99) / 100 THEN duration_ms END) AS p99_ms
    FROM ranked
    GROUP BY tool_name, origin
)
SELECT
    c.tool_name,
    c.origin,
    COUNT(*) AS calls,
    SUM(1 - c.failed) AS ok,
    SUM(c.failed) AS errors,
    p.p50_ms,
    p.p90_ms,
    p.p95_ms,
    p.p99_ms
FROM calls AS c
LEFT JOIN percentiles AS p ON p.tool_name IS c.tool_name AND p.origin IS c.origin
GROUP BY c.tool_name, c.origin
ORDER BY calls DESC, c.tool_name, c.origin
