-- /-/capsem/security: events per session and category, the latest first.
SELECT p.session_id, l.session_name, l.kind, p.category, sum(p.events) AS events,
       count(DISTINCT p.subject) AS subjects, min(p.first_at) AS first_at,
       max(p.last_at) AS last_at
FROM policy_events AS p
LEFT JOIN ledgers AS l ON l.session_id = p.session_id
WHERE (:since IS NULL OR p.day >= :since) AND (:until IS NULL OR p.day <= :until)
  AND (:category IS NULL OR p.category = :category)
GROUP BY p.session_id, p.category
ORDER BY max(p.last_at) DESC, p.session_id, p.category
LIMIT :limit
