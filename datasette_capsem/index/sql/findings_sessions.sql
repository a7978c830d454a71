-- The sessions one finding kind hits, newest first, with their rows per kind.
SELECT f.kind, f.severity, f.session_id, c.session_name, c.kind AS session_kind,
       c.created_at, c.verdict, c.checked_at, sum(f.row_count) AS rows,
       group_concat(coalesce(f.table_name, 'file'), ', ') AS tables
FROM session_findings AS f
JOIN session_checks AS c ON c.session_id = f.session_id
GROUP BY f.kind, f.severity, f.session_id
ORDER BY f.kind, c.created_at DESC, f.session_id
