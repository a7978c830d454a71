-- Model calls whose stop_reason disagrees with the tool calls they emitted (spec §6.2 #14),
-- only where the protocol marks tool turns: Anthropic (`tool_use`) and OpenAI chat completions
-- (`finish_reason=tool_calls`, normalized to tool_use). Gemini (`STOP`) and the OpenAI Responses
-- API (`response.completed`) say end_turn on tool turns by design (spec §4.3).
SELECT
    id,
    CASE WHEN stop_reason IS 'tool_use' THEN 'stop_reason tool_use but no tool calls'
         ELSE 'emitted tool calls but stop_reason is ' || COALESCE(stop_reason, 'NULL')
    END AS reason
FROM model_calls
WHERE (provider = 'anthropic' OR (provider = 'openai' AND path LIKE '%/chat/completions%'))
  AND (stop_reason IS 'tool_use') <> (
      id IN (SELECT model_call_id FROM tool_calls WHERE model_call_id IS NOT NULL)
  )
ORDER BY id
