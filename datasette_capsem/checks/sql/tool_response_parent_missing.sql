-- Tool responses whose model call does not exist (spec §6.2 #4).
SELECT id
FROM tool_responses
WHERE model_call_id NOT IN (SELECT id FROM model_calls)
ORDER BY id
