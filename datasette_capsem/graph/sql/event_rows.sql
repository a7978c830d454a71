-- The rows of one table that carry an event id (one, unless the ledger broke check 1).
SELECT *
FROM {table}
WHERE event_id = :event_id
ORDER BY id
LIMIT :limit
