-- Every row's identifier (event_id, message_id). '000000000000' is the placeholder migrated
-- tool calls share (spec §4.5), not an identifier.
SELECT {column} AS value, id AS row_id
FROM {table}
WHERE typeof({column}) = 'text' AND {column} NOT IN ('', '000000000000')
  AND {own}
