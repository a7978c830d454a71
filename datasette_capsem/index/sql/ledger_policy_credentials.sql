-- Credential broker events per day, provider and outcome (substitution_events).
SELECT 'credential' AS category, 'substitution_events' AS source_table,
       substr({opt:timestamp}, 1, 10) AS day, {opt:provider} AS subject, {opt:outcome} AS detail,
       COUNT(*) AS events, MIN({opt:timestamp}) AS first_at, MAX({opt:timestamp}) AS last_at
FROM substitution_events
WHERE {own}
GROUP BY 3, 4, 5
