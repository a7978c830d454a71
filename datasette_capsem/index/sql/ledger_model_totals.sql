-- Token and cost sums over model_calls, in one pass so they equal a direct SUM (spec §3.5).
SELECT COUNT(*) AS model_calls,
       COALESCE(SUM({input_tokens}), 0) AS input_tokens,
       COALESCE(SUM({output_tokens}), 0) AS output_tokens,
       COALESCE(SUM(CASE WHEN json_valid({usage_details})
                         THEN CAST(json_extract({usage_details}, '$.cache_read') AS INTEGER) END), 0)
           AS cache_read_tokens,
       COALESCE(SUM(CASE WHEN json_valid({usage_details})
                         THEN CAST(json_extract({usage_details}, '$.thinking') AS INTEGER) END), 0)
           AS thinking_tokens,
       COALESCE(SUM({estimated_cost_usd}), 0.0) AS cost_usd,
       MIN({timestamp}) AS first_at,
       MAX({timestamp}) AS last_at
FROM model_calls
WHERE {own}
