-- The model calls of one trace, in the order they happened.
SELECT {columns}
FROM model_calls
WHERE trace_id = :trace_id
ORDER BY timestamp, id
