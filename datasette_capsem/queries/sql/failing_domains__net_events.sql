SELECT lower(t.domain) AS domain, t.timestamp,
       t.decision IN ('denied', 'blocked') AS http_denied,
       COALESCE(t.status_code BETWEEN 400 AND 499, 0) AS http_4xx,
       COALESCE(t.status_code BETWEEN 500 AND 599, 0) AS http_5xx,
       t.decision = 'error' AS http_error,
       0 AS dns_denied,
       0 AS dns_error
FROM net_events AS t
WHERE t.decision IN ('denied', 'blocked', 'error') OR t.status_code >= 400
