-- Tool results recorded in another trace than their call, or under Gemini CLI's id for it: the
-- normal writer paths of spec §4.4 (earlier_calls_of_result.sql says why), one row
-- each with the call it answers and the path the rows tell, checked against Capsem's code:
--   id_scheme: Gemini CLI on an API key (google_interpreter.rs:201-205, request_parser.rs:441-445);
--   retry: a failed exchange (status >= 400, or a stream cut with no stop reason) in the call's
--     trace completed it, so the retried request opened a new trace (telemetry_hook.rs:466-479,
--     638-653; a 403 from a security rule too: mitm_proxy/mod.rs:2724-2739);
--   history: the result was logged before and came again with the conversation, after the
--     call's turn had ended (the Responses API logs every function_call_output of its input:
--     request_parser.rs:292-306; a compaction request does the same: request_parser.rs:150-196);
--   resume: the result landed in an ambient trace that first appears after the call: a new
--     capsem-process with an empty TraceState and a new ambient id (capsem-process
--     main.rs:414-416, telemetry.rs:606-618);
--   trace_completed: the call was no longer pending for another reason (ai_traffic/mod.rs:108-112).
SELECT
    x.id,
    x.call_id,
    x.trace_id,
    x.consumed_by_model_call,
    x.call_row,
    c.trace_id AS call_trace_id,
    {opt:c.event_id} AS call_event_id,
    c.model_call_id AS emitted_by_model_call,
    x.writer_path,
    'answers tool call #' || x.call_row || ' in trace ' || COALESCE(c.trace_id, '?') || ' ('
        || CASE x.writer_path
               WHEN 'id_scheme' THEN 'Gemini CLI names the result ' || x.call_id || ', the writer named the call ' || c.call_id
               WHEN 'retry' THEN 'recorded before a failed exchange and its retry'
               WHEN 'history' THEN 'recorded in an earlier turn, sent again with the history'
               WHEN 'resume' THEN 'recorded before the writer restarted (a resume)'
               ELSE 'recorded before its trace was completed'
           END || ')' AS reason
FROM (
    SELECT
        y.*,
        CASE
            WHEN y.matched_by = 'gemini_cli_id' THEN 'id_scheme'
            WHEN EXISTS (
                SELECT 1 FROM model_calls AS f
                WHERE f.trace_id = (SELECT trace_id FROM tool_calls WHERE id = y.call_row)
                  AND f.id > (SELECT model_call_id FROM tool_calls WHERE id = y.call_row)
                  AND f.id < y.consumed_by_model_call
                  AND (f.status_code >= 400 OR f.stop_reason IS NULL)
            ) THEN 'retry'
            WHEN EXISTS (
                SELECT 1 FROM tool_responses AS p
                WHERE p.call_id = y.call_id AND p.model_call_id < y.consumed_by_model_call
            ) THEN 'history'
            WHEN length(y.trace_id) = 16 AND NOT EXISTS (
                SELECT 1 FROM model_calls AS m
                WHERE m.trace_id = y.trace_id
                  AND m.id < (SELECT model_call_id FROM tool_calls WHERE id = y.call_row)
            ) THEN 'resume'
            ELSE 'trace_completed'
        END AS writer_path
    FROM (
        SELECT
            tr.id,
            tr.call_id,
            tr.trace_id,
            tr.model_call_id AS consumed_by_model_call,
            CASE WHEN earlier_call.call_id IS NOT NULL THEN 'call_id' ELSE 'gemini_cli_id' END
                AS matched_by,
            CASE WHEN earlier_call.call_id IS NOT NULL THEN (
                    SELECT c1.id FROM tool_calls AS c1
                    WHERE c1.call_id = tr.call_id AND c1.model_call_id < tr.model_call_id
                    ORDER BY c1.model_call_id DESC, c1.id DESC LIMIT 1
                )
                ELSE (
                    SELECT c2.id FROM tool_calls AS c2
                    WHERE c2.tool_name = earlier_cli_call.tool_name
                      AND rtrim(c2.call_id, '0123456789') = 'gemini_' || c2.tool_name || '_'
                      AND c2.model_call_id < tr.model_call_id
                    ORDER BY c2.model_call_id DESC, c2.id DESC LIMIT 1
                )
            END AS call_row
        FROM tool_responses AS tr
        LEFT JOIN (SELECT DISTINCT call_id, COALESCE(trace_id, '') AS trace_key FROM tool_calls) AS paired
            ON paired.call_id = tr.call_id AND paired.trace_key = COALESCE(tr.trace_id, '')
        /* include: earlier_calls_of_result */
        WHERE paired.call_id IS NULL
          AND (earlier_call.call_id IS NOT NULL OR earlier_cli_call.tool_name IS NOT NULL)
    ) AS y
) AS x
JOIN tool_calls AS c ON c.id = x.call_row
ORDER BY x.id
