-- Pending rows of asks that never got an answer (spec §6.2 #12, the warning case).
SELECT id
FROM security_ask_events
WHERE status = 'pending'
  AND ask_id NOT IN (
      SELECT ask_id FROM security_ask_events
      WHERE status IN ('approved', 'denied') AND ask_id IS NOT NULL
  )
ORDER BY id
