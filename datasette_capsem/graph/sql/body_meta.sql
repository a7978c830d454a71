-- One body blob's owner, type and size, without its bytes.
SELECT id, event_id, content_type, stored_bytes, original_bytes, truncated,
       length(body) AS body_length
FROM event_body_blobs
WHERE id = :id
