-- How many documents match, without filters (no join: counted on the FTS5 index alone).
SELECT COUNT(*) FROM (SELECT 1 FROM text_search WHERE text_search MATCH :fts LIMIT :cap)
