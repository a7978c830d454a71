-- Timestamps julianday() cannot parse, '' included (spec §6.2 #20).
SELECT id
FROM {table}
WHERE julianday(timestamp) IS NULL
ORDER BY id
