-- Names whose DNS queries were denied or failed.
SELECT 'dns' AS source,
       {opt:qname} AS domain,
       COUNT(*) AS requests,
       COALESCE(SUM({opt:decision} = 'denied'), 0) AS denied,
       COALESCE(SUM({opt:decision} = 'error'), 0) AS errors,
       0 AS status_4xx,
       0 AS status_5xx,
       MAX({opt:timestamp}) AS last_seen
FROM dns_events
WHERE {own}
GROUP BY 2
HAVING denied + errors > 0
