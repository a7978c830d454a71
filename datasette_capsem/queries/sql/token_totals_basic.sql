-- Token and cost totals per provider and model, for files without usage_details.
SELECT
    provider,
    model,
    COUNT(*) AS calls,
    COALESCE(SUM(input_tokens), 0) AS input_tokens,
    COALESCE(SUM(output_tokens), 0) AS output_tokens,
    NULL AS cache_read_tokens,
    NULL AS thinking_tokens,
    COALESCE(SUM(estimated_cost_usd), 0) AS cost_usd
FROM model_calls
GROUP BY provider, model
ORDER BY cost_usd DESC, provider, model
