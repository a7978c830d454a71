-- Index the text rows of one session just written (external-content FTS5: the text lives
-- once, in text_rows).
INSERT INTO text_search (rowid, body)
SELECT id, body FROM text_rows WHERE session_id = :session_id
