-- Rows without an event_id (spec §6.2 #1: NULLs are a warning on migrated files).
SELECT id FROM {table} WHERE event_id IS NULL ORDER BY id
