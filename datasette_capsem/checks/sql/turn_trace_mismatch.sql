-- Rows whose turn_id is set and differs from their trace_id (spec §6.2 #20).
SELECT id
FROM {table}
WHERE turn_id IS NOT NULL AND turn_id IS NOT trace_id
ORDER BY id
