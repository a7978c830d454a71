-- Rows of one table tagged with a trace id.
SELECT {columns}
FROM {table}
WHERE trace_id = :trace_id
ORDER BY id
