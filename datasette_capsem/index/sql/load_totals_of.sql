-- load_totals.sql for some sessions only (:ids, a JSON array): a refresh that changed a few.
/* include: load_totals */
WHERE l.session_id IN (SELECT value FROM json_each(:ids))
