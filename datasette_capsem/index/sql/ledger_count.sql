-- Row count and newest timestamp of one ledger table.
SELECT COUNT(*) AS n, MAX({opt:timestamp}) AS last_at FROM {table}
WHERE {own}
