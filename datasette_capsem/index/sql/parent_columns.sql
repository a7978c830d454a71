-- Every table and column of a fork's parent ledger, attached as capsem_parent.
SELECT m.name AS table_name, p.name AS column_name
FROM capsem_parent.sqlite_master AS m
JOIN pragma_table_info(m.name, 'capsem_parent') AS p
WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
ORDER BY m.name, p.cid
