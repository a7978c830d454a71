-- How many turns (UUID traces with model calls) and ambient exchanges (model calls of the
-- 16-hex ambient trace, spec §4.4) a session has, and how many model calls carry no trace id.
SELECT count(DISTINCT CASE WHEN NOT ambient THEN trace_id END) AS turns,
       sum(ambient) AS exchanges,
       sum(trace_id IS NULL) AS untraced_calls
FROM (
    SELECT trace_id,
           coalesce(length(trace_id) = 16 AND trace_id NOT GLOB '*[^0-9a-f]*', 0) AS ambient
    FROM model_calls
)
