-- The event id of one row of a table (/*TABLE*/ filled from LEDGER_TABLES).
SELECT event_id FROM /*TABLE*/ WHERE id = :id
