-- How many traces have model calls, and how many model calls carry no trace id.
SELECT count(DISTINCT trace_id) AS traces,
       sum(trace_id IS NULL) AS untraced_calls
FROM model_calls
