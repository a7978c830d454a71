-- Per-session ledger figures for the in-memory session list.
SELECT l.session_id, l.problem, l.indexed_at, l.era, t.*
FROM ledgers AS l
LEFT JOIN session_totals AS t ON t.session_id = l.session_id
