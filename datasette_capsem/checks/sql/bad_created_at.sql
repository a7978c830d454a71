-- Body blobs whose created_at julianday() cannot parse (spec §6.2 #20).
SELECT id FROM event_body_blobs WHERE julianday(created_at) IS NULL ORDER BY id
