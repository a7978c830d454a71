-- Trace ids on one table whose rows no turn owns: trace ids no model call carries, and the
-- 16-hex ambient trace (spec §4.4) whose MCP, exec and host rows are session-wide, listed so
-- every trace id has a page.
SELECT trace_id, count(*) AS rows, min(timestamp) AS start
FROM {table}
WHERE trace_id IS NOT NULL
  AND (trace_id NOT IN (SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL)
       OR (length(trace_id) = 16 AND trace_id NOT GLOB '*[^0-9a-f]*'))
GROUP BY trace_id
ORDER BY start DESC
LIMIT :limit
