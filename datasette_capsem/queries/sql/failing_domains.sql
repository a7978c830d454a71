-- Failures per domain, HTTP and DNS side by side. DNS names are compared without a trailing
-- dot and case-insensitively, the way the proxy sees the same host.
SELECT
    domain,
    COUNT(*) AS failures,
    SUM(http_denied) AS http_denied,
    SUM(http_4xx) AS http_4xx,
    SUM(http_5xx) AS http_5xx,
    SUM(http_error) AS http_error,
    SUM(dns_denied) AS dns_denied,
    SUM(dns_error) AS dns_error,
    MIN(timestamp) AS first_seen,
    MAX(timestamp) AS last_seen
FROM (
    {parts}
)
GROUP BY domain
ORDER BY failures DESC, domain
