-- Timestamps julianday() cannot parse, '' included (spec §6.2 #20).
SELECT id
FROM __TABLE__
WHERE julianday(timestamp) IS NULL
ORDER BY id
