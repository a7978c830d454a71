-- Child rows of a file whose child tables have no trace_id yet (before 1.1): owned by one of
-- the trace's model calls.
SELECT {columns}
FROM {table}
WHERE model_call_id IN (SELECT value FROM json_each(:model_call_ids))
ORDER BY id
