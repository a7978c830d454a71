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
ORDER BY cost_usd DESC, calls DESC
