-- Each finding kind across sessions: severity, sessions and rows it hits (the findings page).
SELECT f.kind, f.severity, max(f.title) AS title,
       count(DISTINCT f.session_id) AS sessions, sum(f.row_count) AS rows
FROM session_findings AS f
GROUP BY f.kind, f.severity
ORDER BY CASE f.severity WHEN 'error' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END,
         sessions DESC, f.kind
