-- Model-emitted tool calls that no tool_responses row answers in the same trace (spec §6.2 #6).
-- Pairs are compared with NOT IN over (call_id, trace_id) so SQLite builds one lookup table
-- instead of probing tool_responses once per call; '' stands in for a NULL trace.
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
  AND (tc.call_id, COALESCE(tc.trace_id, '')) NOT IN (
      SELECT call_id, COALESCE(trace_id, '') FROM tool_responses
  )
  AND tc.id NOT IN (SELECT id FROM (
      /* include: unpairable_calls */
  ))
ORDER BY tc.id
