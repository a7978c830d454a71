-- Highlighted snippets of the hits of one page only, from the in-memory table `shown` that
-- holds their text (index/fts.py): FTS5's snippet of each row, matched again there.
SELECT rowid, snippet(shown, 0, ?, ?, '…', ?)
FROM shown
WHERE shown MATCH ?
