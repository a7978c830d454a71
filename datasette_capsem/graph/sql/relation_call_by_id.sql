-- The tool call a call id names, preferring one in the given trace, emitted by the latest model
-- call no later than the given one (the one a response answers).
SELECT id, event_id FROM tool_calls
WHERE call_id = :call_id
ORDER BY (trace_id IS :trace_id) DESC,
         (model_call_id <= coalesce(:model_call_id, model_call_id)) DESC,
         model_call_id DESC, id
LIMIT 1
