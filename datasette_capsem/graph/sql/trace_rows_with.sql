-- The rows of one table whose lookup column holds one of :values, through an index on it: one part
-- of a trace's `OR` (trace_children.sql, trace_joined.sql) split where a big ledger's map
-- holds another part (trace_rows_located.sql).
SELECT {columns}
FROM {table}
WHERE {column} IN (SELECT value FROM json_each(:values))
ORDER BY id
