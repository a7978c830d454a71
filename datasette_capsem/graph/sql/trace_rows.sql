-- Rows of one table tagged with a trace id.
SELECT /*COLUMNS*/
FROM /*TABLE*/
WHERE trace_id = :trace_id
ORDER BY id
