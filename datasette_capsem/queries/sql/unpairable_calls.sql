-- Gemini tool calls (files 2026-03-13..06-10) logged under the bare tool name whose result was
-- logged as gemini_<name>_<n> in the same trace (spec §4.3): a pair Capsem's writer split.
-- Aliases uc (tool_calls) and ur (tool_responses) must be declared by the including query.
SELECT
    uc.id,
    'google (2026-03-13..06-10): the call is logged under its bare tool name, the result as gemini_<name>_<n>' AS habit
FROM tool_calls AS uc
JOIN model_calls AS uc_call ON uc_call.id = uc.model_call_id
WHERE uc_call.provider = 'google'
  AND uc.call_id = uc.tool_name
  AND (uc.call_id, COALESCE({opt:uc.trace_id}, '')) NOT IN (
        SELECT call_id, COALESCE({opt:ur.trace_id}, '') FROM tool_responses AS ur
        WHERE call_id IS NOT NULL
    )
  AND (uc.tool_name, COALESCE({opt:uc.trace_id}, '')) IN (
        SELECT substr(rtrim(ur.call_id, '0123456789'), 8, length(rtrim(ur.call_id, '0123456789')) - 8),
               COALESCE({opt:ur.trace_id}, '')
        FROM tool_responses AS ur
        WHERE ur.call_id LIKE 'gemini\_%\_%' ESCAPE '\'
    )
