-- Model-emitted tool calls that no tool_responses row answers in the same trace (spec §6.2 #6),
-- nor any result recorded later in the session, from another trace or under Gemini CLI's id
-- (later_results_of_call.sql; earlier_calls_of_result.sql says why).
-- An anti-join on the distinct (call_id, trace) pairs of tool_responses (not a row-value
-- NOT IN, nor NOT EXISTS on the call_id index: orphan_tool_responses.sql says why). ''
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
LEFT JOIN (SELECT DISTINCT call_id, COALESCE(trace_id, '') AS trace_key FROM tool_responses) AS answered
    ON answered.call_id = tc.call_id AND answered.trace_key = COALESCE(tc.trace_id, '')
/* include: later_results_of_call */
WHERE tc.origin IN ('native', 'local', 'mcp_proxy')
  AND answered.call_id IS NULL
  AND later_result.call_id IS NULL AND later_cli_result.tool_name IS NULL
  AND tc.id NOT IN (SELECT id FROM (
      /* include: unpairable_calls */
  ))
ORDER BY tc.id
