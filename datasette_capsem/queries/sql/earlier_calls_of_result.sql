-- LEFT JOINs naming, for each tool_responses row tr, a call of its id or of its Gemini CLI
-- twin emitted by an earlier model call anywhere in the session (NULL when none): the
-- session-wide pairing of spec §4.4. Capsem's writer decides a result's trace when the request
-- carrying it arrives, from the calls still pending in its TraceState (capsem-core
-- net/mitm_proxy/telemetry_hook.rs:619-668, net/ai_traffic/mod.rs:57-112): a result whose call
-- is no longer pending (its trace completed by a failed or cut exchange or the end of an
-- earlier turn, or a new capsem-process after a resume) opens a new trace or lands in the
-- ambient one; and Gemini CLI on an API key answers the writer's gemini_<name>_<i>
-- (net/interpreters/google_interpreter.rs:201-205) with its own <name>_<epoch-ms>_<i>
-- (net/ai_traffic/request_parser.rs:441-445, since 2026-06-17), paired here by tool name.
-- Each side is one grouped pass over tool_calls, looked up through SQLite's automatic index,
-- and only for the rows that reach it (the including query filters same-trace pairs first).
-- Alias tr (tool_responses) must be declared by the including query.
LEFT JOIN (
    SELECT call_id, MIN(model_call_id) AS first_emitter
    FROM tool_calls
    WHERE model_call_id IS NOT NULL
    GROUP BY call_id
) AS earlier_call
    ON earlier_call.call_id = tr.call_id AND earlier_call.first_emitter < tr.model_call_id
LEFT JOIN (
    SELECT tool_name, MIN(model_call_id) AS first_emitter
    FROM tool_calls
    WHERE call_id GLOB 'gemini_?*_[0-9]*'
      AND rtrim(call_id, '0123456789') = 'gemini_' || tool_name || '_'
    GROUP BY tool_name
) AS earlier_cli_call
    ON rtrim(tr.call_id, '0123456789') GLOB '?*_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_'
   AND earlier_cli_call.tool_name = substr(rtrim(tr.call_id, '0123456789'), 1,
                                           length(rtrim(tr.call_id, '0123456789')) - 15)
   AND earlier_cli_call.first_emitter < tr.model_call_id
