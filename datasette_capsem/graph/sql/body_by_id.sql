-- One body blob with its bytes. CAST keeps a body stored as TEXT byte-exact.
SELECT id, event_id, event_type, source_table, direction, content_type, original_bytes,
       stored_bytes, truncated, body_hash, length(body) AS body_length, created_at,
       CAST(body AS BLOB) AS body
FROM event_body_blobs
WHERE id = :id
