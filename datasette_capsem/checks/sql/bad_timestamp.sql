-- Timestamps julianday() cannot parse (spec §6.2 #20). :empty_ok lets tool_calls keep ''.
SELECT id
FROM __TABLE__
WHERE julianday(timestamp) IS NULL
  AND NOT (:empty_ok AND timestamp = '')
ORDER BY id
