-- provider, model and time of every model call of a file (copied rows included), for the
-- tool rows that name their call by model_call_id.
SELECT id, {provider} AS provider, {model} AS model, {timestamp} AS at FROM model_calls
