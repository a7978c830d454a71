-- Token and cost sums over model_calls, in one pass so they equal a direct SUM (spec §3.5).
SELECT COUNT(*) AS model_calls,
       COALESCE(SUM({opt:input_tokens}), 0) AS input_tokens,
       COALESCE(SUM({opt:output_tokens}), 0) AS output_tokens,
       COALESCE(SUM(CASE WHEN json_valid({opt:usage_details})
                         THEN CAST(json_extract({opt:usage_details}, '$.cache_read') AS INTEGER) END), 0)
           AS cache_read_tokens,
       COALESCE(SUM(CASE WHEN json_valid({opt:usage_details})
                         THEN CAST(json_extract({opt:usage_details}, '$.thinking') AS INTEGER) END), 0)
           AS thinking_tokens,
       COALESCE(SUM({opt:estimated_cost_usd}), 0.0) AS cost_usd,
       MIN({opt:timestamp}) AS first_at,
       MAX({opt:timestamp}) AS last_at
FROM model_calls
WHERE {own}
