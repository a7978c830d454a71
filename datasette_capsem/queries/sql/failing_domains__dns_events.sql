SELECT lower(rtrim(t.qname, '.')) AS domain, t.timestamp,
       0 AS http_denied, 0 AS http_4xx, 0 AS http_5xx, 0 AS http_error,
       t.decision IN ('denied', 'blocked') AS dns_denied,
       t.decision NOT IN ('denied', 'blocked') AND (t.decision = 'error' OR t.rcode <> 0) AS dns_error
FROM dns_events AS t
WHERE t.decision IN ('denied', 'blocked', 'error') OR t.rcode <> 0
