-- Denied DNS queries per day and name (dns_events.decision 'denied').
SELECT 'denied_domain' AS category, 'dns_events' AS source_table,
       substr({opt:timestamp}, 1, 10) AS day, {opt:qname} AS subject, 'dns' AS detail,
       COUNT(*) AS events, MIN({opt:timestamp}) AS first_at, MAX({opt:timestamp}) AS last_at
FROM dns_events
WHERE {opt:decision} = 'denied' AND {own}
GROUP BY 3, 4
