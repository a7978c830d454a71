-- The indexed text of the hits of one page only (their snippets are cut from these).
-- {rowids}: one placeholder per hit.
SELECT id, body FROM text_rows WHERE id IN ({rowids})
