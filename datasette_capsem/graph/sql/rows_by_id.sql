-- Rows of one table by primary key (to tell a missing parent from one in another trace).
SELECT {columns}
FROM {table}
WHERE id IN (SELECT value FROM json_each(:ids))
