-- The simple row checks of one table in one pass (checks/fused.py): bit i of
-- capsem_checks is check i's condition, each evaluated once a row. Not a check of its own
-- (no .json declares it).
SELECT id, {bits} AS capsem_checks
FROM {table}
ORDER BY id
