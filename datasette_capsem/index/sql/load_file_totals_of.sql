-- load_file_totals.sql for some sessions only (:ids, a JSON array).
/* include: load_file_totals */
WHERE session_id IN (SELECT value FROM json_each(:ids))
