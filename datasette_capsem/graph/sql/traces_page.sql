-- One page of a session's turns, newest first: what Capsem's planned trace viewer listed
-- (spec §8.3): start, duration, model calls, tool calls, tokens, cost, final stop_reason,
-- and its first and last model calls (what was asked, how the reply began).
-- A UUID trace is one turn. The 16-hex ambient trace (spec §4.4; graph/exchanges.py) is not:
-- each of its model calls is listed as an exchange of its own (`exchange` = its model call id).
-- The two columns per listed turn read model_calls by trace id (its index), not the whole
-- `keyed` list: a page costs its 50 turns, not 50 scans of every model call.
WITH keyed AS (
    SELECT *,
           CASE WHEN length(trace_id) = 16 AND trace_id NOT GLOB '*[^0-9a-f]*'
                THEN id END AS exchange
    FROM model_calls
    WHERE trace_id IS NOT NULL
),
traces AS (
    SELECT trace_id,
           exchange,
           min(timestamp) AS start,
           min(julianday(timestamp)) AS start_day,
           max(julianday(timestamp) + coalesce(duration_ms, 0) / 86400000.0) AS end_day,
           count(*) AS model_calls,
           sum(input_tokens) AS input_tokens,
           sum(output_tokens) AS output_tokens,
           sum(estimated_cost_usd) AS cost_usd,
           group_concat(DISTINCT provider) AS providers,
           group_concat(id) AS call_ids
    FROM keyed
    GROUP BY trace_id, exchange
    ORDER BY start DESC, trace_id, exchange
    LIMIT :limit OFFSET :offset
)
SELECT t.trace_id, t.exchange, t.start, t.model_calls, t.input_tokens, t.output_tokens,
       t.cost_usd, t.providers,
       round((t.end_day - t.start_day) * 86400000.0) AS duration_ms,
       (SELECT count(*) FROM tool_calls AS tc
         WHERE tc.model_call_id IN (SELECT m.id FROM model_calls AS m
                                     WHERE m.trace_id = t.trace_id
                                       AND (CASE WHEN length(m.trace_id) = 16
                                                  AND m.trace_id NOT GLOB '*[^0-9a-f]*'
                                                 THEN m.id END) IS t.exchange)) AS tool_calls,
       (SELECT m.stop_reason FROM model_calls AS m
         WHERE m.trace_id = t.trace_id
           AND (CASE WHEN length(m.trace_id) = 16 AND m.trace_id NOT GLOB '*[^0-9a-f]*'
                     THEN m.id END) IS t.exchange
         ORDER BY m.timestamp DESC, m.id DESC LIMIT 1) AS final_stop_reason,
       (SELECT m.id FROM model_calls AS m
         WHERE m.trace_id = t.trace_id
           AND (CASE WHEN length(m.trace_id) = 16 AND m.trace_id NOT GLOB '*[^0-9a-f]*'
                     THEN m.id END) IS t.exchange
         ORDER BY m.timestamp, m.id LIMIT 1) AS first_call_id,
       (SELECT m.id FROM model_calls AS m
         WHERE m.trace_id = t.trace_id
           AND (CASE WHEN length(m.trace_id) = 16 AND m.trace_id NOT GLOB '*[^0-9a-f]*'
                     THEN m.id END) IS t.exchange
         ORDER BY m.timestamp DESC, m.id DESC LIMIT 1) AS last_call_id
FROM traces AS t
ORDER BY t.start DESC, t.trace_id, t.exchange
