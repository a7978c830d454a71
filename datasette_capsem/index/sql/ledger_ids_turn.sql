-- turn_id equals trace_id on current rows (spec §4.4); only differing ones are stored.
SELECT {column} AS value, MIN(id) AS row_id
FROM {table}
WHERE typeof({column}) = 'text' AND {column} != '' AND {column} IS NOT {opt:trace_id}
  AND {own}
GROUP BY {column}
