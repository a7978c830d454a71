-- Row count and newest timestamp of one ledger table.
SELECT COUNT(*) AS n, MAX({timestamp}) AS last_at FROM {table}
WHERE {own}
