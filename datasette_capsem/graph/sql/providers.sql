-- Model usage of a session by provider and model (what Capsem's Model tab shows, spec §8.2).
SELECT provider, model,
       count(*) AS calls,
       sum(input_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens,
       sum(estimated_cost_usd) AS cost_usd,
       min(timestamp) AS first_call,
       max(timestamp) AS last_call
FROM model_calls
GROUP BY provider, model
ORDER BY calls DESC, provider, model
