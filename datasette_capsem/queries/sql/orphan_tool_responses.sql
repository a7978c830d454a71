-- Tool responses with no tool call of the same call_id in the same trace (spec §6.2 #3).
-- NOT EXISTS probes tool_calls' call_id index once per response. A row-value NOT IN would
-- scan the whole call list for every response it does not find (SQLite 3.40 looks for a
-- NULL that could make the answer NULL): 13 s on a 500-call Ollama session that logs
-- 189,000 responses. Same rows: call_id is NOT NULL in every era's DDL.
SELECT
    tr.id,
    tr.model_call_id,
    tr.call_id,
    tr.trace_id,
    tr.is_error,
    substr(tr.content_preview, 1, 200) AS content_preview
FROM tool_responses AS tr
WHERE NOT EXISTS (
    SELECT 1 FROM tool_calls AS tc
    WHERE tc.call_id = tr.call_id AND COALESCE(tc.trace_id, '') = COALESCE(tr.trace_id, '')
)
  AND tr.id NOT IN (SELECT id FROM (
      /* include: unpairable_responses */
  ))
ORDER BY tr.id
