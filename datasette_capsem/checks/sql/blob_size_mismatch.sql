-- Body blobs whose size fields disagree with their bytes (spec §6.2 #10). length() and
-- typeof() applied straight to the column read only the record header, not 10 MiB of body.
WITH sized AS (
    SELECT
        id, stored_bytes, original_bytes, truncated,
        CASE typeof(body)
            WHEN 'null' THEN 0
            WHEN 'blob' THEN length(body)
            ELSE length(CAST(body AS BLOB))
        END AS body_bytes
    FROM event_body_blobs
)
SELECT id, rtrim(
    CASE WHEN body_bytes <> stored_bytes
         THEN printf('body is %d bytes but stored_bytes says %d; ', body_bytes, stored_bytes) ELSE '' END
    || CASE WHEN truncated IS NOT (stored_bytes < original_bytes)
            THEN printf('truncated=%s with %d of %d bytes stored; ', truncated, stored_bytes, original_bytes)
            ELSE '' END
    || CASE WHEN stored_bytes > 10485760 THEN 'more than the 10 MiB cap; ' ELSE '' END,
    '; ') AS reason
FROM sized
WHERE body_bytes <> stored_bytes
   OR truncated IS NOT (stored_bytes < original_bytes)
   OR stored_bytes > 10485760
ORDER BY id
