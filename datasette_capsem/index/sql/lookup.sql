-- Where an identifier occurs: one row per session, table and first row holding it.
SELECT session_id, id_kind, table_name, row_id
FROM id_lookup
WHERE value = :value
ORDER BY session_id, table_name, row_id
LIMIT :limit
