-- load_totals.sql for some sessions only (:ids, a JSON array): a refresh that changed a few.
SELECT l.session_id, l.problem, l.indexed_at, l.era, l.ledger_path, l.inherited_from,
       l.inherited_rows, l.inherited_problem, t.*
FROM ledgers AS l
LEFT JOIN session_totals AS t ON t.session_id = l.session_id
WHERE l.session_id IN (SELECT value FROM json_each(:ids))
