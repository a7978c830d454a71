-- The event id of one row of a table ({table} filled from LEDGER_TABLES).
SELECT event_id FROM {table} WHERE id = :id
