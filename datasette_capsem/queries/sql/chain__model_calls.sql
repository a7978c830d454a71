SELECT t.timestamp AS time, 'model_calls' AS table_name, t.id AS row_id,
       {opt:t.event_id} AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       t.id AS model_call_id,
       printf('%s %s: %s in / %s out tokens, stop %s', t.provider, t.model, t.input_tokens,
              t.output_tokens, t.stop_reason) AS summary
FROM model_calls AS t
WHERE t.{key} = :{key}
