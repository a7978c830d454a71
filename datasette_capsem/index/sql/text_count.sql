-- How many documents match (counted up to :cap).
SELECT COUNT(*) FROM (
    SELECT 1
    FROM text_search
    JOIN text_rows AS r ON r.id = text_search.rowid
    WHERE text_search MATCH :fts{where}
    LIMIT :cap
)
