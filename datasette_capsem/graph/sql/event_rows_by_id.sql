-- The rows of one table that carry an event id, by the row ids an event id map found
-- (a table without an index on event_id; the event id is checked again).
SELECT *
FROM {table}
WHERE id IN (SELECT value FROM json_each(:ids))
  AND event_id = :event_id
ORDER BY id
LIMIT :limit
