-- Tool responses a model call carried back to the model.
SELECT id, call_id, trace_id FROM tool_responses
WHERE model_call_id = :model_call_id ORDER BY id LIMIT :limit
