-- Model calls whose stop_reason disagrees with the tool calls they emitted (spec §6.2 #14).
SELECT
    id,
    CASE WHEN stop_reason IS 'tool_use' THEN 'stop_reason tool_use but no tool calls'
         ELSE 'emitted tool calls but stop_reason is ' || COALESCE(stop_reason, 'NULL')
    END AS reason
FROM model_calls
WHERE (stop_reason IS 'tool_use') <> (
    id IN (SELECT model_call_id FROM tool_calls WHERE model_call_id IS NOT NULL)
)
ORDER BY id
