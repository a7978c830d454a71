-- Tables whose DDL names a collation: their identifiers compare as SQLite's collation says,
-- so extract.read_ids reads them with SQL (ledger_ids_*), not in one pass.
SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%collate%'
