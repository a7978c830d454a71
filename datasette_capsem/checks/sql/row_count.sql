-- Rows in one ledger table (__TABLE__ is a name from the engine's fixed list).
SELECT COUNT(*) FROM __TABLE__
