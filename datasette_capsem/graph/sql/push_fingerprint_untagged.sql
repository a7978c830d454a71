-- push-otlp's fingerprint of a table with no trace_id column in this file (older eras): one
-- group, which every trace of the file takes into its fingerprint.
SELECT NULL AS trace_id, count(*) AS n, max(rowid) AS last_rowid, NULL AS done, NULL AS ms
FROM {table}
