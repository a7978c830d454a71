-- Per-session ledger figures for the in-memory session list (a fork's: its own rows). The
-- snapshot keeps one for every session: what the list reads (index/listing.py) and a fork's
-- provenance, not the file's path, era or time of indexing (~2 MB at 10,000 sessions).
SELECT l.session_id, l.problem, l.inherited_from, l.inherited_rows, l.inherited_problem, t.*
FROM ledgers AS l
LEFT JOIN session_totals AS t ON t.session_id = l.session_id
