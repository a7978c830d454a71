-- Body blobs of one event id, without their bytes.
SELECT id, event_id, event_type, source_table, direction, content_type, original_bytes,
       stored_bytes, truncated, body_hash, length(body) AS body_length, created_at
FROM event_body_blobs
WHERE event_id = :event_id
ORDER BY source_table, direction DESC, id
