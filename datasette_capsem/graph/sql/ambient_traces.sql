-- Trace ids on one table that no model call carries: the ambient process trace of MCP, exec
-- and host rows (spec §4.4), listed so every trace id has a page.
SELECT trace_id, count(*) AS rows, min(timestamp) AS start
FROM /*TABLE*/
WHERE trace_id IS NOT NULL
  AND trace_id NOT IN (SELECT trace_id FROM model_calls WHERE trace_id IS NOT NULL)
GROUP BY trace_id
ORDER BY start DESC
LIMIT :limit
