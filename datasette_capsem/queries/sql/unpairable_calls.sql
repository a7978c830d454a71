-- Gemini tool calls (files 2026-03-13..06-10) logged under the bare tool name, with results of
-- that tool logged as gemini_<name>_<n> in the file (spec §4.3): pairs Capsem's writer split,
-- often across traces too (unpairable_responses.sql says why).
-- Aliases uc (tool_calls) and ur (tool_responses) must be declared by the including query.
SELECT
    uc.id,
    'google (2026-03-13..06-10): the call is logged under its bare tool name, the result as gemini_<name>_<n>' AS habit
FROM tool_calls AS uc
JOIN model_calls AS uc_call ON uc_call.id = uc.model_call_id
LEFT JOIN (  -- an anti-join: orphan_tool_responses.sql says why
    SELECT DISTINCT ur.call_id, COALESCE({opt:ur.trace_id}, '') AS trace_key
    FROM tool_responses AS ur
) AS uc_answered
    ON uc_answered.call_id = uc.call_id AND uc_answered.trace_key = COALESCE({opt:uc.trace_id}, '')
WHERE uc_call.provider = 'google'
  AND uc.call_id = uc.tool_name
  AND uc_answered.call_id IS NULL
  AND uc.tool_name IN (
        SELECT substr(rtrim(ur.call_id, '0123456789'), 8, length(rtrim(ur.call_id, '0123456789')) - 8)
        FROM tool_responses AS ur
        WHERE ur.call_id LIKE 'gemini\_%\_%' ESCAPE '\'
    )
