-- Which of the given event ids have a row in one table.
SELECT DISTINCT event_id
FROM {table}
WHERE event_id IN (SELECT value FROM json_each(:event_ids))
