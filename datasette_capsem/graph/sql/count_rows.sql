-- Rows in one ledger table.
SELECT count(*) AS n FROM {table}
