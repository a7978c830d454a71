-- One page of a session's traces, newest first: what Capsem's planned trace viewer listed
-- (spec §8.3): start, duration, model calls, tool calls, tokens, cost, final stop_reason.
WITH traces AS (
    SELECT trace_id,
           min(timestamp) AS start,
           min(julianday(timestamp)) AS start_day,
           max(julianday(timestamp) + coalesce(duration_ms, 0) / 86400000.0) AS end_day,
           count(*) AS model_calls,
           sum(input_tokens) AS input_tokens,
           sum(output_tokens) AS output_tokens,
           sum(estimated_cost_usd) AS cost_usd,
           group_concat(DISTINCT provider) AS providers
    FROM model_calls
    WHERE trace_id IS NOT NULL
    GROUP BY trace_id
    ORDER BY start DESC, trace_id
    LIMIT :limit OFFSET :offset
)
SELECT t.trace_id, t.start, t.model_calls, t.input_tokens, t.output_tokens, t.cost_usd,
       t.providers,
       round((t.end_day - t.start_day) * 86400000.0) AS duration_ms,
       (SELECT count(*) FROM tool_calls AS tc
         WHERE tc.model_call_id IN (SELECT m.id FROM model_calls AS m
                                     WHERE m.trace_id = t.trace_id)) AS tool_calls,
       (SELECT m.stop_reason FROM model_calls AS m
         WHERE m.trace_id = t.trace_id
         ORDER BY m.timestamp DESC, m.id DESC LIMIT 1) AS final_stop_reason
FROM traces AS t
ORDER BY t.start DESC, t.trace_id
