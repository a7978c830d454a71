-- main.db rollups per day of creation and status.
SELECT
    date(created_at) AS day,
    status,
    COUNT(*) AS sessions,
    COALESCE(SUM(total_input_tokens), 0) AS input_tokens,
    COALESCE(SUM(total_output_tokens), 0) AS output_tokens,
    COALESCE(SUM(total_input_tokens), 0) + COALESCE(SUM(total_output_tokens), 0) AS tokens,
    COALESCE(SUM(total_estimated_cost), 0) AS cost_usd,
    COALESCE(SUM(total_requests), 0) AS requests,
    COALESCE(SUM(total_tool_calls), 0) AS tool_calls
FROM sessions
GROUP BY day, status
ORDER BY day DESC, status
