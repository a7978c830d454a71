-- HTTP requests per decision and domain: what the policy let through and what it stopped.
SELECT
    decision,
    domain,
    COUNT(*) AS requests,
    COALESCE(SUM(bytes_sent), 0) AS bytes_sent,
    COALESCE(SUM(bytes_received), 0) AS bytes_received,
    MIN(timestamp) AS first_seen,
    MAX(timestamp) AS last_seen
FROM net_events
GROUP BY decision, domain
ORDER BY decision, requests DESC, domain
