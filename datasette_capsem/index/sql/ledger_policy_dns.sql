-- Denied DNS queries per day and name (dns_events.decision 'denied').
SELECT 'denied_domain' AS category, 'dns_events' AS source_table,
       substr({timestamp}, 1, 10) AS day, {qname} AS subject, 'dns' AS detail,
       COUNT(*) AS events, MIN({timestamp}) AS first_at, MAX({timestamp}) AS last_at
FROM dns_events
WHERE {decision} = 'denied' AND {own}
GROUP BY 3, 4
