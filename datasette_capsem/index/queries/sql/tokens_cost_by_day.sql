SELECT day,
       provider,
       model,
       COUNT(DISTINCT session_id) AS sessions,
       SUM(calls) AS calls,
       SUM(input_tokens) AS input_tokens,
       SUM(output_tokens) AS output_tokens,
       SUM(cache_read_tokens) AS cache_read_tokens,
       SUM(thinking_tokens) AS thinking_tokens,
       ROUND(SUM(cost_usd), 6) AS cost_usd
FROM model_usage
WHERE (:since = '' OR day >= :since) AND (:until = '' OR day <= :until)
GROUP BY day, provider, model
ORDER BY day DESC, cost_usd DESC
