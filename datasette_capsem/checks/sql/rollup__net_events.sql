-- main.db rollup figures from net_events, as update_session_rollup_from_session_db computes them.
SELECT
    COUNT(*) AS total_requests,
    COALESCE(SUM(decision = 'allowed'), 0) AS allowed_requests,
    COALESCE(SUM(decision = 'denied'), 0) AS denied_requests
FROM net_events
