-- Every row of one chain (trace or turn), oldest first: the rows the trace page draws
-- (graph/trace_rows.py). Rows tagged with the key come first; tool calls, tool responses and
-- model items also belong when one of the chain's model calls owns them (files before 1.1 have
-- no trace_id on them); security rows and body blobs also belong when their event_id names one
-- of the chain's own rows (security ask and decision rows often carry no trace_id). Those last
-- arms read `chain` itself, hence RECURSIVE; each joins only rows of primary tables, so the
-- recursion stops after one step. A row reached twice is kept once (DISTINCT).
--
-- Each arm comes from one table the file has; its `time` is RFC 3339 text. julianday()
-- resolves only ~0.1 ms, so rows are ordered by the UTC second, then by the fraction padded
-- to nanoseconds (Capsem writes 6 or 9 fractional digits; security rows, from milliseconds, 3).
WITH RECURSIVE chain(time, table_name, row_id, event_id, trace_id, turn_id, summary) AS (
    /* parts */
)
SELECT DISTINCT time, table_name, row_id, event_id, trace_id, turn_id, summary
FROM chain
ORDER BY
    strftime('%Y-%m-%dT%H:%M:%S', time),
    CASE WHEN substr(time, 20, 1) = '.'
         THEN substr(rtrim(substr(time, 21), 'Z') || '000000000', 1, 9)
         ELSE '000000000' END,
    table_name,
    row_id
