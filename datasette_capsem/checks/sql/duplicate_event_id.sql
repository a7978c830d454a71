-- Every row whose event_id another row of the same table also has (spec §6.2 #1).
-- :placeholder is the migration placeholder for tool_calls (NULL elsewhere), never a duplicate.
SELECT id
FROM {table}
WHERE event_id IN (
    SELECT event_id
    FROM {table}
    WHERE event_id IS NOT NULL AND event_id IS NOT :placeholder
    GROUP BY event_id
    HAVING COUNT(*) > 1
)
ORDER BY id
