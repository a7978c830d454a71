-- Tool responses with no tool call of the same call_id, for files without trace_id.
SELECT
    tr.id,
    tr.model_call_id,
    tr.call_id,
    tr.is_error,
    substr(tr.content_preview, 1, 200) AS content_preview
FROM tool_responses AS tr
WHERE tr.call_id NOT IN (SELECT call_id FROM tool_calls WHERE call_id IS NOT NULL)
  AND tr.id NOT IN (SELECT id FROM (
      /* include: unpairable_responses */
  ))
ORDER BY tr.id
