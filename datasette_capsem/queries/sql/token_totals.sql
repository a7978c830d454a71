-- Token and cost totals per provider and model. usage_details is JSON written by Capsem;
-- json_valid() keeps one malformed cell from turning the whole page into an error.
SELECT
    provider,
    model,
    COUNT(*) AS calls,
    COALESCE(SUM(input_tokens), 0) AS input_tokens,
    COALESCE(SUM(output_tokens), 0) AS output_tokens,
    COALESCE(SUM(CASE WHEN json_valid(usage_details)
                      THEN json_extract(usage_details, '$.cache_read') END), 0) AS cache_read_tokens,
    COALESCE(SUM(CASE WHEN json_valid(usage_details)
                      THEN json_extract(usage_details, '$.thinking') END), 0) AS thinking_tokens,
    COALESCE(SUM(estimated_cost_usd), 0) AS cost_usd
FROM model_calls
GROUP BY provider, model
ORDER BY cost_usd DESC, provider, model
