-- Security rows and body blobs of a trace: joined to its rows by event_id, or tagged with it.
SELECT {columns}
FROM {table}
WHERE event_id IN (SELECT value FROM json_each(:event_ids))
   OR trace_id = :trace_id
ORDER BY id
