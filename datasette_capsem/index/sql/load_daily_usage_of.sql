-- load_daily_usage.sql for some sessions only (:ids, a JSON array).
SELECT session_id, day, COALESCE(provider, '(none)') AS provider,
       SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
       SUM(cost_usd) AS cost_usd
FROM model_usage
WHERE session_id IN (SELECT value FROM json_each(:ids))
GROUP BY session_id, day, provider
