-- Tool responses Capsem's writer can never pair with a call, by a provider's habit (spec
-- §4.3), with the habit that explains each. A response that pairs normally is never listed.
--   Ollama (every era): no tool call is parsed from responses, and every role=tool message of
--   the history is logged as ollama_tool_result_<message index>.
--   Gemini (files 2026-03-13..06-10): the call is logged under the bare tool name, its result
--   as gemini_<name>_<n>; listed when a bare-name call of that tool exists in the file. Not
--   in the trace: a request whose results match no known call starts a new trace (or takes
--   the ambient one), so the writer splits the pair across traces too (spec §4.4).
-- Aliases ur (tool_responses) and uc (tool_calls) must be declared by the including query.
SELECT
    ur.id,
    CASE WHEN ur_call.provider = 'ollama'
         THEN 'ollama: Capsem parses no tool calls from Ollama responses and logs every role=tool message as ollama_tool_result_<index>'
         ELSE 'google (2026-03-13..06-10): the call is logged under its bare tool name, the result as gemini_<name>_<n>'
    END AS habit
FROM tool_responses AS ur
JOIN model_calls AS ur_call ON ur_call.id = ur.model_call_id
LEFT JOIN (  -- an anti-join: orphan_tool_responses.sql says why
    SELECT DISTINCT uc.call_id, COALESCE({opt:uc.trace_id}, '') AS trace_key
    FROM tool_calls AS uc
) AS ur_paired
    ON ur_paired.call_id = ur.call_id AND ur_paired.trace_key = COALESCE({opt:ur.trace_id}, '')
WHERE ur_paired.call_id IS NULL
  AND (
        (ur_call.provider = 'ollama' AND ur.call_id LIKE 'ollama\_tool\_result\_%' ESCAPE '\')
     OR (ur_call.provider = 'google' AND ur.call_id LIKE 'gemini\_%\_%' ESCAPE '\'
         AND substr(rtrim(ur.call_id, '0123456789'), 8, length(rtrim(ur.call_id, '0123456789')) - 8)
             IN (SELECT uc.call_id FROM tool_calls AS uc WHERE uc.call_id = uc.tool_name))
  )
