-- File events per action.
SELECT
    action,
    COUNT(*) AS events,
    COUNT(DISTINCT path) AS paths,
    COALESCE(SUM(size), 0) AS bytes,
    MIN(timestamp) AS first_seen,
    MAX(timestamp) AS last_seen
FROM fs_events
GROUP BY action
ORDER BY events DESC, action
