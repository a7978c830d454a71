-- Tool responses with no tool call of the same call_id in the same trace (spec §6.2 #3), nor
-- any call the writer recorded earlier in the session that the result answers from another
-- trace or under Gemini CLI's id (earlier_calls_of_result.sql says why).
-- An anti-join: each response looks its (call_id, trace) up in the distinct pairs of
-- tool_calls, through the automatic index SQLite builds on them. Not a row-value NOT IN,
-- which scans the whole pair list for every response it does not find (SQLite 3.40 looks
-- for a NULL that could make the answer NULL): 13 s on a 500-call Ollama session logging
-- 189,000 responses. Not NOT EXISTS on the call_id index either, which walks every call of
-- a recurring id (Gemini's gemini_<tool>_0, ~4,000 calls each in a 1,000,000-row session:
-- 18 s). Both sessions take 0.07-0.2 s this way. Same rows as NOT IN: call_id is NOT NULL
-- in every era's DDL. '' stands in for a NULL trace.
SELECT
    tr.id,
    tr.model_call_id,
    tr.call_id,
    tr.trace_id,
    tr.is_error,
    substr(tr.content_preview, 1, 200) AS content_preview
FROM tool_responses AS tr
LEFT JOIN (SELECT DISTINCT call_id, COALESCE(trace_id, '') AS trace_key FROM tool_calls) AS paired
    ON paired.call_id = tr.call_id AND paired.trace_key = COALESCE(tr.trace_id, '')
/* include: earlier_calls_of_result */
WHERE paired.call_id IS NULL
  AND earlier_call.call_id IS NULL AND earlier_cli_call.tool_name IS NULL
  AND tr.id NOT IN (SELECT id FROM (
      /* include: unpairable_responses */
  ))
ORDER BY tr.id
