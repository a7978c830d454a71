-- Tool responses consumed by a model call at or before the one that emitted the call
-- (spec §6.2 #5). One row per response; `emitted_by_model_call` is the latest emitter.
SELECT
    tr.id,
    tr.call_id,
    tr.trace_id,
    tr.model_call_id AS consumed_by_model_call,
    calls.emitted_by_model_call
FROM tool_responses AS tr
JOIN (
    SELECT call_id, COALESCE(trace_id, '') AS trace_key, MAX(model_call_id) AS emitted_by_model_call
    FROM tool_calls
    WHERE model_call_id IS NOT NULL
    GROUP BY call_id, trace_key
) AS calls ON calls.call_id = tr.call_id AND calls.trace_key = COALESCE(tr.trace_id, '')
WHERE tr.model_call_id <= calls.emitted_by_model_call
ORDER BY tr.id
