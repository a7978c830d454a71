-- Which of the given call ids have a row in one table.
SELECT DISTINCT call_id
FROM {table}
WHERE call_id IN (SELECT value FROM json_each(:call_ids))
