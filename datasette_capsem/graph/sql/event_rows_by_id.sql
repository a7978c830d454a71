-- The rows of one table that carry an event id, by the row ids an event id map found
-- (a table without an index on event_id), and among the rows written since the map was read
-- (ids above :after: a live ledger's). The event id is checked again.
SELECT *
FROM {table}
WHERE id IN (SELECT value FROM json_each(:ids))
  AND event_id = :event_id
UNION ALL
SELECT *
FROM {table}
WHERE id > :after
  AND event_id = :event_id
ORDER BY id
LIMIT :limit
