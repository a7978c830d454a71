-- Each integrity finding kind across sessions (the quick check the index runs in the
-- background): severity, how many sessions and rows it hits, the newest session it hits.
SELECT f.kind, f.severity, max(f.title) AS title,
       count(DISTINCT f.session_id) AS sessions, sum(f.row_count) AS rows,
       max(c.created_at) AS newest_session_created
FROM session_findings AS f
JOIN session_checks AS c ON c.session_id = f.session_id
WHERE (:severity = '' OR f.severity = :severity)
GROUP BY f.kind, f.severity
ORDER BY CASE f.severity WHEN 'error' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,
         sessions DESC, f.kind
