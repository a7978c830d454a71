-- Body blobs whose body_hash does not name the blake3 of their stored bytes (spec §6.2 #10).
-- The hash covers the original captured bytes (spec §4.4), so a truncated blob cannot be
-- verified and is never a mismatch. capsem_body_hash_verdict() is registered on the connection
-- by the check engine and is the verdict the trace graph and pages give (ledger/bodies.py).
-- CAST keeps a body stored as TEXT byte-exact.
SELECT id
FROM event_body_blobs
WHERE capsem_body_hash_verdict(CAST(body AS BLOB), body_hash, truncated) = 'mismatch'
ORDER BY id
