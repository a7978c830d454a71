-- The whole schema as text: files that give the same text have the same tables and columns
-- (ledgers of one Capsem era share it), so their introspection is shared.
SELECT group_concat(type || ' ' || name || ' ' || ifnull(sql, ''), char(10))
FROM (SELECT type, name, sql FROM sqlite_master ORDER BY type, name)
