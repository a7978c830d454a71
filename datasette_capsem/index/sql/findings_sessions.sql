-- The sessions one finding kind hits, newest first, with their rows per kind: at most :limit
-- per kind (the page links the list filtered by the kind for all of them), so a kind hitting
-- thousands of sessions costs a page of them, not thousands.
SELECT kind, severity, session_id, session_name, session_kind, created_at, verdict,
       checked_at, rows, tables
FROM (
    SELECT f.kind, f.severity, f.session_id, c.session_name, c.kind AS session_kind,
           c.created_at, c.verdict, c.checked_at, sum(f.row_count) AS rows,
           group_concat(coalesce(f.table_name, 'file'), ', ') AS tables,
           row_number() OVER (
               PARTITION BY f.kind, f.severity ORDER BY c.created_at DESC, f.session_id
           ) AS place
    FROM session_findings AS f
    JOIN session_checks AS c ON c.session_id = f.session_id
    GROUP BY f.kind, f.severity, f.session_id
)
WHERE place <= :limit
ORDER BY kind, created_at DESC, session_id
