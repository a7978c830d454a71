-- One page of full-text hits, best first (bm25), with what a page shows beside each.
-- {where}: fixed filter clauses from index/fts.py, their values bound as parameters.
SELECT r.id AS doc_id, r.session_id, r.kind, r.table_name, r.row_id, r.event_id, r.trace_id,
       r.model_call_id, r.provider, r.model, r.at, l.session_name,
       text_search.rank AS rank
FROM text_search
JOIN text_rows AS r ON r.id = text_search.rowid
LEFT JOIN ledgers AS l ON l.session_id = r.session_id
WHERE text_search MATCH :fts{where}
ORDER BY text_search.rank
LIMIT :limit OFFSET :offset
