-- provider, model and time of every model call of a file (copied rows included), for the
-- tool rows that name their call by model_call_id.
SELECT id, {opt:provider} AS provider, {opt:model} AS model, {opt:timestamp} AS at FROM model_calls
