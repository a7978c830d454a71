-- push-otlp's fingerprint of exec_events: Capsem inserts the row at dispatch and fills
-- exit_code and duration_ms by a later UPDATE (spec §3), so those count too.
SELECT trace_id, count(*) AS n, max(rowid) AS last_rowid,
       count(exit_code) AS done, total(duration_ms) AS ms
FROM exec_events
GROUP BY trace_id
