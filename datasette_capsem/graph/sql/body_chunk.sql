-- A slice of one body blob's bytes (1-based :offset), for a streamed download. CAST keeps a
-- body stored as TEXT byte-exact.
SELECT substr(CAST(body AS BLOB), :offset, :size) AS chunk
FROM event_body_blobs
WHERE id = :id
