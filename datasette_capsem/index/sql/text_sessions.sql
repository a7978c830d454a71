-- The sessions the matching documents are in, most hits first: how many hits each, and the
-- time of its newest. Over the first :cap matching documents (a bound on the work of a very
-- common word). {where}: fixed filter clauses from index/fts.py, values bound as parameters.
SELECT session_id, COUNT(*) AS hits, MAX(at) AS last_at
FROM (
    SELECT r.session_id, r.at
    FROM text_search
    JOIN text_rows AS r ON r.id = text_search.rowid
    WHERE text_search MATCH :fts{where}
    LIMIT :cap
)
GROUP BY session_id
ORDER BY hits DESC, last_at DESC, session_id
