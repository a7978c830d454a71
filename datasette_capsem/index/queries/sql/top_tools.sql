WITH ranked AS (
    SELECT tool_name, origin, duration_ms,
           ROW_NUMBER() OVER (PARTITION BY tool_name, origin ORDER BY duration_ms) AS rank,
           COUNT(*) OVER (PARTITION BY tool_name, origin) AS timed
    FROM tool_calls
    WHERE duration_ms IS NOT NULL
),
percentiles AS (
    SELECT tool_name, origin,
           MIN(CASE WHEN rank >= 0.50 * timed THEN duration_ms END) AS p50_ms,
           MIN(CASE WHEN rank >= 0.90 * timed THEN duration_ms END) AS p90_ms,
           MIN(CASE WHEN rank >= 0.99 * timed THEN duration_ms END) AS p99_ms,
           MAX(duration_ms) AS max_ms
    FROM ranked
    GROUP BY tool_name, origin
)
SELECT t.tool_name,
       t.origin,
       COUNT(*) AS calls,
       SUM(t.failed) AS failed,
       COUNT(DISTINCT t.session_id) AS sessions,
       p.p50_ms,
       p.p90_ms,
       p.p99_ms,
       p.max_ms
FROM tool_calls AS t
LEFT JOIN percentiles AS p ON p.tool_name IS t.tool_name AND p.origin IS t.origin
GROUP BY t.tool_name, t.origin
ORDER BY calls DESC
LIMIT 200
