-- Credential broker events per day, provider and outcome (substitution_events).
SELECT 'credential' AS category, 'substitution_events' AS source_table,
       substr({timestamp}, 1, 10) AS day, {provider} AS subject, {outcome} AS detail,
       COUNT(*) AS events, MIN({timestamp}) AS first_at, MAX({timestamp}) AS last_at
FROM substitution_events
WHERE {own}
GROUP BY 3, 4, 5
