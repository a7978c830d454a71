-- One row per provider and model (row_kind 'model', most expensive first), then the grand
-- total over every model (row_kind 'total': its sessions are distinct sessions, not a sum).
WITH per_model AS (
    SELECT provider,
           model,
           COUNT(DISTINCT session_id) AS sessions,
           SUM(calls) AS calls,
           SUM(input_tokens) AS input_tokens,
           SUM(output_tokens) AS output_tokens,
           SUM(cache_read_tokens) AS cache_read_tokens,
           SUM(thinking_tokens) AS thinking_tokens,
           ROUND(SUM(cost_usd), 6) AS cost_usd,
           MIN(day) AS first_day,
           MAX(day) AS last_day
    FROM model_usage
    GROUP BY provider, model
),
total AS (
    SELECT NULL AS provider,
           NULL AS model,
           COUNT(DISTINCT session_id) AS sessions,
           SUM(calls) AS calls,
           SUM(input_tokens) AS input_tokens,
           SUM(output_tokens) AS output_tokens,
           SUM(cache_read_tokens) AS cache_read_tokens,
           SUM(thinking_tokens) AS thinking_tokens,
           ROUND(SUM(cost_usd), 6) AS cost_usd,
           MIN(day) AS first_day,
           MAX(day) AS last_day
    FROM model_usage
)
SELECT row_kind, provider, model, sessions, calls, input_tokens, output_tokens,
       cache_read_tokens, thinking_tokens, cost_usd, first_day, last_day
FROM (
    SELECT 'model' AS row_kind, 0 AS placed_last, * FROM per_model
    UNION ALL
    SELECT 'total' AS row_kind, 1 AS placed_last, * FROM total WHERE calls IS NOT NULL
)
ORDER BY placed_last, cost_usd DESC, calls DESC
