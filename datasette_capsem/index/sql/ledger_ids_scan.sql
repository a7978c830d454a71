-- Every identifier column of one ledger table in one pass (extract.read_ids sorts them out;
-- one statement per table instead of one per identifier kind: preparing a statement costs
-- more than reading a small table).
SELECT id, {columns} FROM {table}
