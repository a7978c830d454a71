-- Denied HTTP requests per day and domain (spec §4.3: net_events.decision 'denied').
SELECT 'denied_domain' AS category, 'net_events' AS source_table,
       substr({opt:timestamp}, 1, 10) AS day, {opt:domain} AS subject, 'http' AS detail,
       COUNT(*) AS events, MIN({opt:timestamp}) AS first_at, MAX({opt:timestamp}) AS last_at
FROM net_events
WHERE {opt:decision} = 'denied' AND {own}
GROUP BY 3, 4
