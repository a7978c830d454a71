-- Tool calls a model call emitted.
SELECT id, event_id, call_id, tool_name FROM tool_calls
WHERE model_call_id = :model_call_id ORDER BY id LIMIT :limit
