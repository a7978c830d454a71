-- Model usage of a session by provider and model (what Capsem's Model tab shows, spec §8.2).
SELECT provider, model,
       count(*) AS calls,
       sum(input_tokens) AS input_tokens,
       sum(output_tokens) AS output_tokens,
       round(sum(estimated_cost_usd), 6) AS cost_usd,
       min(timestamp) AS first_call,
       max(timestamp) AS last_call
FROM model_calls
GROUP BY provider, model
ORDER BY calls DESC, provider, model
