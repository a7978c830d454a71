-- What push-otlp compares between runs, per trace id of one table: how many rows and the last
-- rowid (Capsem appends). Rows with a NULL trace_id form one group, which every trace of the
-- file takes into its fingerprint.
SELECT trace_id, count(*) AS n, max(rowid) AS last_rowid, NULL AS done, NULL AS ms
FROM {table}
GROUP BY trace_id
