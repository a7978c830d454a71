-- The stored bytes of some body blobs, to check their blake3 hashes. CAST keeps a body that
-- was stored as TEXT byte-exact (no UTF-8 decoding on the way out).
SELECT id, CAST(body AS BLOB) AS body, body_hash
FROM event_body_blobs
WHERE id IN (SELECT value FROM json_each(:ids))
