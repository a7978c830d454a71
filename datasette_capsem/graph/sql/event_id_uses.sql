-- How many rows of one table carry each of the given event ids.
SELECT event_id, count(*) AS uses
FROM {table}
WHERE event_id IN (SELECT value FROM json_each(:event_ids))
GROUP BY event_id
