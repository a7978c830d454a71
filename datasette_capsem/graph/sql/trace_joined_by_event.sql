-- Security rows and body blobs of a file whose table has no trace_id: joined by event_id only.
SELECT {columns}
FROM {table}
WHERE event_id IN (SELECT value FROM json_each(:event_ids))
ORDER BY id
