-- Rows of one table by primary key (to tell a missing parent from one in another trace).
SELECT /*COLUMNS*/
FROM /*TABLE*/
WHERE id IN (SELECT value FROM json_each(:ids))
