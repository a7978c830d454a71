-- Audit rows linked to a missing exec row (spec §6.2 #16).
SELECT id
FROM audit_events
WHERE exec_event_id IS NOT NULL
  AND exec_event_id NOT IN (SELECT id FROM exec_events)
ORDER BY id
