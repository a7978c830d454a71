-- Every row's event id of a table without an index on event_id, for a map read once per
-- file version (graph/events.EventLocator).
SELECT event_id, id
FROM {table}
WHERE typeof(id) = 'integer'
