-- Domains with denied, errored, 4xx or 5xx requests. status_code is cast because a hostile or
-- broken file may store it as text, which SQLite sorts above every number.
SELECT 'net' AS source,
       {opt:domain} AS domain,
       COUNT(*) AS requests,
       COALESCE(SUM({opt:decision} = 'denied'), 0) AS denied,
       COALESCE(SUM({opt:decision} = 'error'), 0) AS errors,
       COALESCE(SUM(CAST({opt:status_code} AS INTEGER) BETWEEN 400 AND 499), 0) AS status_4xx,
       COALESCE(SUM(CAST({opt:status_code} AS INTEGER) >= 500), 0) AS status_5xx,
       MAX({opt:timestamp}) AS last_seen
FROM net_events
WHERE {own}
GROUP BY 2
HAVING denied + errors + status_4xx + status_5xx > 0
