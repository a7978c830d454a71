-- Every row of one chain (trace or turn), oldest first: the rows the trace page draws
-- (graph/trace_rows.py). Rows tagged with the key come first; tool calls, tool responses and
-- model items also belong when one of the chain's model calls owns them (files before 1.1 have
-- no trace_id on them); security rows and body blobs also belong when their event_id names one
-- of the chain's own rows (security ask and decision rows often carry no trace_id). Those last
-- arms read `chain` itself, hence RECURSIVE; each joins only rows of primary tables, so the
-- recursion stops after one step. A row reached twice is kept once (GROUP BY).
--
-- `model_call_id` is the model call that owns a row (the call itself, its items, tool calls and
-- responses, and the security rows and bodies joined to those). On the 16-hex ambient trace
-- (spec §4.4) each model call is an exchange of its own (`exchange`), and the rows no call owns
-- form the ambient lane (`lane`); on a turn's UUID trace every row's lane is 'turn'.
--
-- Each arm comes from one table the file has; its `time` is RFC 3339 text. julianday()
-- resolves only ~0.1 ms, so rows are ordered by the UTC second, then by the fraction padded
-- to nanoseconds (Capsem writes 6 or 9 fractional digits; security rows, from milliseconds, 3).
WITH RECURSIVE chain(time, table_name, row_id, event_id, trace_id, turn_id, model_call_id, summary) AS (
    {parts}
)
SELECT time, table_name, row_id, event_id, trace_id, turn_id, model_call_id,
       CASE WHEN ambient THEN model_call_id END AS exchange,
       CASE WHEN NOT ambient THEN 'turn'
            WHEN model_call_id IS NULL THEN 'ambient'
            ELSE 'exchange' END AS lane,
       summary
FROM (
    -- A row reached by two arms is kept once, with the model call that owns it if any arm
    -- found one (SQLite takes the other columns from the row max() picked).
    SELECT time, table_name, row_id, event_id, trace_id, turn_id, max(model_call_id) AS model_call_id,
           summary, length(:{key}) = 16 AND :{key} NOT GLOB '*[^0-9a-f]*' AS ambient
    FROM chain
    GROUP BY table_name, row_id
)
ORDER BY
    strftime('%Y-%m-%dT%H:%M:%S', time),
    CASE WHEN substr(time, 20, 1) = '.'
         THEN substr(rtrim(substr(time, 21), 'Z') || '000000000', 1, 9)
         ELSE '000000000' END,
    table_name,
    row_id
