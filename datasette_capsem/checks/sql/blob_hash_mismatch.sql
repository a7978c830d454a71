-- Body blobs whose body_hash does not name the blake3 of their stored bytes, truncated ones
-- included: the hash covers the bytes stored in `body` (the writer's model, the generator, hashes
-- them for capped blobs too). capsem_body_hash_ok() is registered on the connection by the check
-- engine and is the same verdict the trace graph and event pages give (ledger/bodies.py).
-- CAST keeps a body stored as TEXT byte-exact.
SELECT id
FROM event_body_blobs
WHERE NOT capsem_body_hash_ok(CAST(body AS BLOB), body_hash)
ORDER BY id
