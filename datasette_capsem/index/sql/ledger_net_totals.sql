-- Rollup figures of net_events as Capsem's stop rollup computes them (spec §3.5).
SELECT COUNT(*) AS requests,
       COALESCE(SUM({opt:decision} = 'allowed'), 0) AS allowed_requests,
       COALESCE(SUM({opt:decision} = 'denied'), 0) AS denied_requests,
       COALESCE(SUM({opt:decision} = 'error'), 0) AS error_requests,
       MIN({opt:timestamp}) AS first_at,
       MAX({opt:timestamp}) AS last_at
FROM net_events
WHERE {own}
