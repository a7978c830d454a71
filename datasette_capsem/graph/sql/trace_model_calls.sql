-- The model calls of one trace, in the order they happened.
SELECT /*COLUMNS*/
FROM model_calls
WHERE trace_id = :trace_id
ORDER BY timestamp, id
