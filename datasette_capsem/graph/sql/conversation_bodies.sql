-- Request and response bodies of a trace's model calls, the first :limit bytes of each
-- (CAST keeps a body stored as TEXT byte-exact).
SELECT id, event_id, source_table, direction, content_type, truncated,
       length(body) AS body_length, substr(CAST(body AS BLOB), 1, :limit) AS body
FROM event_body_blobs
WHERE event_id IN (SELECT value FROM json_each(:event_ids))
ORDER BY id
