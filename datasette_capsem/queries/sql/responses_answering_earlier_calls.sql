-- Tool responses whose call Capsem's writer recorded earlier in the session, in any trace
-- (spec §4.4). The writer decides a result's trace when the request carrying it arrives, from
-- the calls still pending in its TraceState (capsem-core net/mitm_proxy/telemetry_hook.rs:
-- 619-668, net/ai_traffic/mod.rs:57-112): a result whose call is no longer pending (its trace
-- completed by a failed exchange or the end of an earlier turn, or a new capsem-process after a
-- resume) opens a new trace or lands in the ambient one. And Gemini CLI on an API key answers
-- the writer's gemini_<name>_<i> (net/interpreters/google_interpreter.rs:201-205) with its own
-- <name>_<epoch-ms>_<i> (net/ai_traffic/request_parser.rs:441-445, since 2026-06-17). So a
-- result pairs with a call of its id, or of that Gemini CLI equivalent by tool name, emitted by
-- an earlier model call anywhere in the session. Same-trace pairs are listed too.
-- CROSS JOIN keeps tool_responses outermost: each row looks its id up once in the automatic
-- index of the grouped calls (no walk over a recurring id's calls; orphan_tool_responses.sql).
-- Aliases pe (tool_responses) and pe_cli, pe_calls, pe_named are this file's own.
SELECT pe.id, 'call_id' AS matched_by
FROM tool_responses AS pe
CROSS JOIN (
    SELECT call_id, MIN(model_call_id) AS first_emitter
    FROM tool_calls
    WHERE model_call_id IS NOT NULL
    GROUP BY call_id
) AS pe_calls ON pe_calls.call_id = pe.call_id
WHERE pe_calls.first_emitter < pe.model_call_id
UNION ALL
SELECT pe_cli.id, 'gemini_cli_id' AS matched_by
FROM (
    SELECT id, model_call_id, rtrim(call_id, '0123456789') AS head
    FROM tool_responses
    WHERE call_id GLOB '?*_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_[0-9]*'
) AS pe_cli
CROSS JOIN (
    SELECT tool_name, MIN(model_call_id) AS first_emitter
    FROM tool_calls
    WHERE call_id GLOB 'gemini_?*_[0-9]*'
      AND rtrim(call_id, '0123456789') = 'gemini_' || tool_name || '_'
    GROUP BY tool_name
) AS pe_named ON pe_named.tool_name = substr(pe_cli.head, 1, length(pe_cli.head) - 15)
WHERE pe_cli.head GLOB '?*_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_'
  AND pe_named.first_emitter < pe_cli.model_call_id
