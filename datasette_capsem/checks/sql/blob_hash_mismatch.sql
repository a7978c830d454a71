-- Body blobs whose blake3 hash does not match their bytes. capsem_blake3() is registered on
-- the connection by the check engine (SQLite has no blake3).
SELECT id
FROM event_body_blobs
WHERE truncated = 0
  AND body_hash IS NOT 'blake3:' || capsem_blake3(body)
ORDER BY id
