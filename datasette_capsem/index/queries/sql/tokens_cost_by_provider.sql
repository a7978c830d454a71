-- One row per provider and model (row_kind 'model', most expensive first), then the grand
-- total over every model (row_kind 'total': its sessions are distinct sessions, not a sum).
-- Each usage row is counted twice, once under its model and once under the total.
WITH usage AS (
    SELECT session_id, day, calls, input_tokens, output_tokens, cache_read_tokens,
           thinking_tokens, cost_usd, provider, model
    FROM model_usage
),
keyed AS (
    SELECT 'model' AS row_kind, provider AS by_provider, model AS by_model, * FROM usage
    UNION ALL
    SELECT 'total', NULL, NULL, * FROM usage
)
SELECT row_kind,
       by_provider AS provider,
       by_model AS model,
       COUNT(DISTINCT session_id) AS sessions,
       SUM(calls) AS calls,
       SUM(input_tokens) AS input_tokens,
       SUM(output_tokens) AS output_tokens,
       SUM(cache_read_tokens) AS cache_read_tokens,
       SUM(thinking_tokens) AS thinking_tokens,
       ROUND(SUM(cost_usd), 6) AS cost_usd,
       MIN(day) AS first_day,
       MAX(day) AS last_day
FROM keyed
GROUP BY row_kind, by_provider, by_model
ORDER BY row_kind = 'total', cost_usd DESC, calls DESC
