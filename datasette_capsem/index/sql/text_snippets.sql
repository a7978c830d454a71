-- Highlighted snippets of the hits of one page only. {rowids}: one placeholder per hit.
SELECT rowid, snippet(text_search, 0, ?, ?, '…', ?)
FROM text_search
WHERE text_search MATCH ? AND rowid IN ({rowids})
