-- Tool calls no response answers, for files without trace_id: matched on call_id alone.
SELECT
    tc.id,
    tc.model_call_id,
    tc.origin,
    tc.tool_name,
    tc.call_id
FROM tool_calls AS tc
WHERE tc.origin IN ('native', 'local', 'mcp_proxy')
  AND tc.call_id NOT IN (SELECT call_id FROM tool_responses WHERE call_id IS NOT NULL)
  AND tc.id NOT IN (SELECT id FROM (
      /* include: unpairable_calls */
  ))
ORDER BY tc.id
