-- event_ids that are set but are not 12 lowercase hex characters (spec §6.2 #1).
SELECT id
FROM {table}
WHERE event_id IS NOT NULL
  AND (typeof(event_id) <> 'text' OR length(event_id) <> 12 OR event_id GLOB '*[^0-9a-f]*')
ORDER BY id
