-- main.db rollup figures from model_calls.
SELECT
    COALESCE(SUM(input_tokens), 0) AS total_input_tokens,
    COALESCE(SUM(output_tokens), 0) AS total_output_tokens,
    COALESCE(SUM(estimated_cost_usd), 0.0) AS total_estimated_cost
FROM model_calls
