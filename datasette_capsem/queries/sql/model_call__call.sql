SELECT 0 AS role_rank, 'call' AS role, 'model_calls' AS table_name, t.id AS row_id,
       t.timestamp AS time, NULL AS call_id,
       printf('%s %s %s%s: %s in / %s out tokens, $%.6f, stop %s, trace %s', t.provider, t.model,
              t.method, t.path, t.input_tokens, t.output_tokens, t.estimated_cost_usd,
              t.stop_reason, {opt:t.trace_id}) AS detail
FROM model_calls AS t
WHERE t.id = :model_call_id
