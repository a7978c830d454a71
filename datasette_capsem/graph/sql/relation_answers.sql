-- Tool responses answering one tool call (same call id, same trace, carried no earlier than the
-- model call that emitted it), with the model call that consumed each.
SELECT r.id, r.model_call_id, m.event_id AS model_event_id
FROM tool_responses AS r LEFT JOIN model_calls AS m ON m.id = r.model_call_id
WHERE r.call_id = :call_id AND r.trace_id IS :trace_id
  AND r.model_call_id >= coalesce(:model_call_id, 0)
ORDER BY r.id LIMIT :limit
