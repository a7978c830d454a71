-- Tool responses with no tool call of the same call_id in the same trace (spec §6.2 #3).
SELECT
    tr.id,
    tr.model_call_id,
    tr.call_id,
    tr.trace_id,
    tr.is_error,
    substr(tr.content_preview, 1, 200) AS content_preview
FROM tool_responses AS tr
WHERE (tr.call_id, COALESCE(tr.trace_id, '')) NOT IN (
    SELECT call_id, COALESCE(trace_id, '') FROM tool_calls
)
  AND tr.id NOT IN (SELECT id FROM (
      /* include: unpairable_responses */
  ))
ORDER BY tr.id
