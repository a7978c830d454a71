-- Body blobs whose parent row is missing from their source_table (spec §6.2 #9).
-- The body itself is never selected: it can be 10 MiB.
SELECT
    b.id,
    b.event_id,
    b.source_table,
    b.direction,
    b.event_type,
    b.stored_bytes,
    b.created_at,
    b.trace_id
FROM event_body_blobs AS b
WHERE CASE b.source_table
    WHEN 'net_events' THEN
        b.event_id NOT IN (SELECT event_id FROM net_events WHERE event_id IS NOT NULL)
    WHEN 'model_calls' THEN
        b.event_id NOT IN (SELECT event_id FROM model_calls WHERE event_id IS NOT NULL)
    WHEN 'tool_calls' THEN
        b.event_id NOT IN (SELECT event_id FROM tool_calls WHERE event_id IS NOT NULL)
    ELSE 1
END
ORDER BY b.id
