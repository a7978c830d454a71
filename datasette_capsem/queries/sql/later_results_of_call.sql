-- LEFT JOINs naming, for each tool_calls row tc, a result of its id, or Gemini CLI's
-- <name>_<epoch-ms>_<i> for the writer's gemini_<name>_<i>, carried by a later model call
-- anywhere in the session (NULL when none): earlier_calls_of_result.sql from the call's side
-- (it says why, with the writer's code). Alias tc (tool_calls) must be declared by the
-- including query.
LEFT JOIN (
    SELECT call_id, MAX(model_call_id) AS last_consumer
    FROM tool_responses
    GROUP BY call_id
) AS later_result
    ON later_result.call_id = tc.call_id AND later_result.last_consumer > tc.model_call_id
LEFT JOIN (
    SELECT substr(head, 1, length(head) - 15) AS tool_name, MAX(model_call_id) AS last_consumer
    FROM (SELECT model_call_id, rtrim(call_id, '0123456789') AS head FROM tool_responses)
    WHERE head GLOB '?*_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_'
    GROUP BY 1
) AS later_cli_result
    ON tc.call_id GLOB 'gemini_?*_[0-9]*'
   AND rtrim(tc.call_id, '0123456789') = 'gemini_' || tc.tool_name || '_'
   AND later_cli_result.tool_name = tc.tool_name
   AND later_cli_result.last_consumer > tc.model_call_id
