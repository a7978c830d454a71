SELECT domain,
       source,
       COUNT(DISTINCT session_id) AS sessions,
       SUM(requests) AS requests,
       SUM(denied) AS denied,
       SUM(errors) AS errors,
       SUM(status_4xx) AS status_4xx,
       SUM(status_5xx) AS status_5xx,
       SUM(denied + errors + status_4xx + status_5xx) AS failures,
       MAX(last_seen) AS last_seen
FROM failing_domains
GROUP BY domain, source
ORDER BY failures DESC, domain
LIMIT 500
