-- Tokens and cost per provider, model and UTC day. usage_details is JSON with only cache_read
-- and thinking (spec §7); a value that is not valid JSON counts as absent.
SELECT {opt:provider} AS provider,
       {opt:model} AS model,
       date({opt:timestamp}) AS day,
       COUNT(*) AS calls,
       COALESCE(SUM({opt:input_tokens}), 0) AS input_tokens,
       COALESCE(SUM({opt:output_tokens}), 0) AS output_tokens,
       COALESCE(SUM(CASE WHEN json_valid({opt:usage_details})
                         THEN CAST(json_extract({opt:usage_details}, '$.cache_read') AS INTEGER) END), 0)
           AS cache_read_tokens,
       COALESCE(SUM(CASE WHEN json_valid({opt:usage_details})
                         THEN CAST(json_extract({opt:usage_details}, '$.thinking') AS INTEGER) END), 0)
           AS thinking_tokens,
       COALESCE(SUM({opt:estimated_cost_usd}), 0.0) AS cost_usd,
       COALESCE(SUM({opt:duration_ms}), 0) AS duration_ms
FROM model_calls
WHERE {own}
GROUP BY 1, 2, 3
