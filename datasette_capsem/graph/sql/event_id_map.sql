-- Every row's lookup values (event id, trace id, model call id) of a table without an index
-- on them, for a map read once per file version (graph/events.EventLocator): the row id
-- first, then the columns mapped.
SELECT id, {columns}
FROM {table}
WHERE typeof(id) = 'integer'
