-- Model-emitted tool calls that no tool_responses row answers in the same trace (spec §6.2 #6).
-- Each call probes tool_responses' call_id index (NOT EXISTS); a row-value NOT IN would scan
-- every response for each call it does not find (orphan_tool_responses.sql says why). ''
-- stands in for a NULL trace.
SELECT
    tc.id,
    {opt:tc.timestamp} AS timestamp,
    tc.model_call_id,
    tc.origin,
    tc.tool_name,
    tc.call_id,
    tc.trace_id
FROM tool_calls AS tc
WHERE tc.origin IN ('native', 'local', 'mcp_proxy')
  AND NOT EXISTS (
      SELECT 1 FROM tool_responses AS tr
      WHERE tr.call_id = tc.call_id AND COALESCE(tr.trace_id, '') = COALESCE(tc.trace_id, '')
  )
  AND tc.id NOT IN (SELECT id FROM (
      /* include: unpairable_calls */
  ))
ORDER BY tc.id
