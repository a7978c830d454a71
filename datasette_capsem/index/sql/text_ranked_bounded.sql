-- One page of full-text hits of a query that matches more documents than are ranked: the
-- best (bm25) of the first :bound matches in index order, not of every match, so a prefix
-- search such as `a*` (100,000 matches on one big ledger) ranks :bound rows, not all.
-- {where}: fixed filter clauses from index/fts.py, their values bound as parameters.
SELECT r.id AS doc_id, r.session_id, r.kind, r.table_name, r.row_id, r.event_id, r.trace_id,
       r.model_call_id, r.provider, r.model, r.at, l.session_name,
       m.rank AS rank
FROM (
    SELECT text_search.rowid AS doc, text_search.rank AS rank
    FROM text_search
    JOIN text_rows AS r ON r.id = text_search.rowid
    WHERE text_search MATCH :fts{where}
    LIMIT :bound
) AS m
JOIN text_rows AS r ON r.id = m.doc
LEFT JOIN ledgers AS l ON l.session_id = r.session_id
ORDER BY m.rank
LIMIT :limit OFFSET :offset
