-- Tool calls whose model call does not exist (spec §6.2 #2).
SELECT id
FROM tool_calls
WHERE model_call_id IS NOT NULL
  AND model_call_id NOT IN (SELECT id FROM model_calls)
ORDER BY id
