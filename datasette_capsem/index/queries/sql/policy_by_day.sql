-- What policy stopped or flagged, per day and category, across sessions (policy_events).
SELECT day, category, sum(events) AS events, count(DISTINCT session_id) AS sessions
FROM policy_events
WHERE (:since = '' OR day >= :since) AND (:until = '' OR day <= :until)
  AND (:category = '' OR category = :category)
GROUP BY day, category
ORDER BY day DESC, category
