-- Tool calls a result answered later in the session, in any trace, under the call's own id or
-- Gemini CLI's <name>_<epoch-ms>_<i> for the writer's gemini_<name>_<i>: the same pairing as
-- responses_answering_earlier_calls.sql, from the call's side (it says why). Same-trace pairs
-- are listed too. CROSS JOIN keeps tool_calls outermost, one index lookup per call.
-- Aliases ae, ae_results and ae_cli are this file's own.
SELECT ae.id
FROM tool_calls AS ae
CROSS JOIN (
    SELECT call_id, MAX(model_call_id) AS last_consumer
    FROM tool_responses
    GROUP BY call_id
) AS ae_results ON ae_results.call_id = ae.call_id
WHERE ae.model_call_id < ae_results.last_consumer
UNION ALL
SELECT ae.id
FROM tool_calls AS ae
CROSS JOIN (
    SELECT substr(head, 1, length(head) - 15) AS tool_name, MAX(model_call_id) AS last_consumer
    FROM (
        SELECT model_call_id, rtrim(call_id, '0123456789') AS head
        FROM tool_responses
        WHERE call_id GLOB '?*_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_[0-9]*'
    )
    WHERE head GLOB '?*_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_'
    GROUP BY 1
) AS ae_cli ON ae_cli.tool_name = ae.tool_name
WHERE ae.call_id GLOB 'gemini_?*_[0-9]*'
  AND rtrim(ae.call_id, '0123456789') = 'gemini_' || ae.tool_name || '_'
  AND ae.model_call_id < ae_cli.last_consumer
