-- Every row of one chain (trace or turn), oldest first. Each arm below comes from one table
-- the file has; its `time` is RFC 3339 text so julianday() can order all tables together.
SELECT time, table_name, row_id, event_id, trace_id, turn_id, summary
FROM (
    /* parts */
)
ORDER BY julianday(time), time, row_id
