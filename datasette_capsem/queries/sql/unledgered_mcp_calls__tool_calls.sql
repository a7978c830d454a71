SELECT event_id FROM tool_calls WHERE event_id IS NOT NULL
