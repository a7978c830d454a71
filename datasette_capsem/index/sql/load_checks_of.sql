-- load_checks.sql for some sessions only (:ids, a JSON array).
/* include: load_checks */
WHERE c.session_id IN (SELECT value FROM json_each(:ids))
