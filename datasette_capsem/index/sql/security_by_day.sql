-- /-/capsem/security: events and sessions per day and category.
SELECT day, category, sum(events) AS events, count(DISTINCT session_id) AS sessions
FROM policy_events
WHERE (:since IS NULL OR day >= :since) AND (:until IS NULL OR day <= :until)
  AND (:category IS NULL OR category = :category)
GROUP BY day, category
ORDER BY day DESC, category
