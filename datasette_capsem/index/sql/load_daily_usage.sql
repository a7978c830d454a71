-- Tokens and cost per session, day and provider, for charts that follow the list's filters.
SELECT session_id, day, COALESCE(provider, '(none)') AS provider,
       SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens,
       SUM(cost_usd) AS cost_usd
FROM model_usage
GROUP BY session_id, day, provider
