-- /-/capsem/security: the ledger tables each session's rows of the page were read from, so
-- each row can link to the rows it summarises (index database, policy_events).
SELECT DISTINCT session_id, category, source_table
FROM policy_events
WHERE (:since IS NULL OR day >= :since) AND (:until IS NULL OR day <= :until)
  AND (:category IS NULL OR category = :category)
ORDER BY session_id, category, source_table
