-- The rows of one table whose lookup column holds one of :values, a column no index starts with:
-- among the row ids a big ledger's map found for those values (graph/events.EventLocator,
-- read once per file version) and the rows written since it was read (ids above :after).
-- The value is checked again here: the map need only find every such row (a trace id is
-- kept there as a hash).
SELECT {columns}
FROM {table}
WHERE id IN (SELECT value FROM json_each(:ids))
  AND {column} IN (SELECT value FROM json_each(:values))
UNION ALL
SELECT {columns}
FROM {table}
WHERE id > :after
  AND {column} IN (SELECT value FROM json_each(:values))
ORDER BY id
