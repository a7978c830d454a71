-- Tokens and cost per provider, model and UTC day. usage_details is JSON with only cache_read
-- and thinking (spec §7); a value that is not valid JSON counts as absent.
SELECT {provider} AS provider,
       {model} AS model,
       date({timestamp}) AS day,
       COUNT(*) AS calls,
       COALESCE(SUM({input_tokens}), 0) AS input_tokens,
       COALESCE(SUM({output_tokens}), 0) AS output_tokens,
       COALESCE(SUM(CASE WHEN json_valid({usage_details})
                         THEN CAST(json_extract({usage_details}, '$.cache_read') AS INTEGER) END), 0)
           AS cache_read_tokens,
       COALESCE(SUM(CASE WHEN json_valid({usage_details})
                         THEN CAST(json_extract({usage_details}, '$.thinking') AS INTEGER) END), 0)
           AS thinking_tokens,
       COALESCE(SUM({estimated_cost_usd}), 0.0) AS cost_usd,
       COALESCE(SUM({duration_ms}), 0) AS duration_ms
FROM model_calls
WHERE {own}
GROUP BY 1, 2, 3
