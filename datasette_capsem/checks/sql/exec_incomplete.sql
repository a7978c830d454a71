-- Execs that never completed (spec §6.2 #15); only run on stopped sessions.
SELECT id FROM exec_events WHERE exit_code IS NULL ORDER BY id
