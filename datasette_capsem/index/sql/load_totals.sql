-- Per-session ledger figures for the in-memory session list (a fork's: its own rows).
SELECT l.session_id, l.problem, l.indexed_at, l.era, l.ledger_path, l.inherited_from,
       l.inherited_rows, l.inherited_problem, t.*
FROM ledgers AS l
LEFT JOIN session_totals AS t ON t.session_id = l.session_id
