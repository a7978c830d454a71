-- load_checks.sql for some sessions only (:ids, a JSON array).
SELECT c.session_id, c.verdict, c.errors, c.warnings, c.infos, c.problem, c.checked_at,
       c.row_sig, c.profile,
       (SELECT group_concat(kind, ' ') FROM (
            SELECT DISTINCT f.kind FROM session_findings AS f
            WHERE f.session_id = c.session_id ORDER BY f.kind)) AS kinds
FROM session_checks AS c
WHERE c.session_id IN (SELECT value FROM json_each(:ids))
