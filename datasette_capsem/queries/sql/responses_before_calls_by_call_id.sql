-- Tool responses consumed at or before the emitting model call, for files without trace_id.
-- CROSS JOIN keeps tool_responses outermost: one pass, each response probing an automatic
-- index of the call groups (responses_before_calls.sql says why).
SELECT
    tr.id,
    tr.call_id,
    tr.model_call_id AS consumed_by_model_call,
    calls.emitted_by_model_call
FROM tool_responses AS tr
CROSS JOIN (
    SELECT call_id, MIN(model_call_id) AS emitted_by_model_call
    FROM tool_calls
    WHERE model_call_id IS NOT NULL
    GROUP BY call_id
) AS calls ON calls.call_id = tr.call_id
WHERE tr.model_call_id <= calls.emitted_by_model_call
ORDER BY tr.id
