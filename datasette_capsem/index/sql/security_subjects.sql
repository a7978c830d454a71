-- /-/capsem/security: what was stopped or flagged (domain, tool, rule, provider), most first.
SELECT category, subject, detail, sum(events) AS events, count(DISTINCT session_id) AS sessions,
       max(last_at) AS last_at
FROM policy_events
WHERE (:since IS NULL OR day >= :since) AND (:until IS NULL OR day <= :until)
  AND (:category IS NULL OR category = :category)
GROUP BY category, subject, detail
ORDER BY events DESC, category, subject
LIMIT :limit
