-- Every row of one chain (trace or turn), oldest first. Each arm below comes from one table
-- the file has; its `time` is RFC 3339 text. julianday() resolves only ~0.1 ms, so rows are
-- ordered by the UTC second, then by the fraction padded to nanoseconds (Capsem writes 6 or
-- 9 fractional digits; security rows, from milliseconds, 3).
SELECT time, table_name, row_id, event_id, trace_id, turn_id, summary
FROM (
    /* parts */
)
ORDER BY
    strftime('%Y-%m-%dT%H:%M:%S', time),
    CASE WHEN substr(time, 20, 1) = '.'
         THEN substr(rtrim(substr(time, 21), 'Z') || '000000000', 1, 9)
         ELSE '000000000' END,
    table_name,
    row_id
