-- Tool responses consumed by a model call at or before the one that emitted the call
-- (spec §6.2 #5). Gemini reuses call ids in consecutive steps (gemini_read_file_0 in every
-- response), so a response is early only when NO call with its id in the trace came from an
-- earlier model call: `emitted_by_model_call` is the first emitter.
-- CROSS JOIN keeps tool_responses outermost (SQLite never reorders it), so each response looks
-- up its (call_id, trace) group in an automatic index: one pass. Left to itself the planner
-- walked the groups and fetched every response of the call_id by its index, across traces
-- too, and Gemini's gemini_<tool>_0 recurs in thousands of traces (22 s on 1M rows, now 0.6 s).
SELECT
    tr.id,
    tr.call_id,
    tr.trace_id,
    tr.model_call_id AS consumed_by_model_call,
    calls.emitted_by_model_call
FROM tool_responses AS tr
CROSS JOIN (
    SELECT call_id, COALESCE(trace_id, '') AS trace_key, MIN(model_call_id) AS emitted_by_model_call
    FROM tool_calls
    WHERE model_call_id IS NOT NULL
    GROUP BY call_id, trace_key
) AS calls ON calls.call_id = tr.call_id AND calls.trace_key = COALESCE(tr.trace_id, '')
WHERE tr.model_call_id <= calls.emitted_by_model_call
ORDER BY tr.id
