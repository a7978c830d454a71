-- Where an identifier occurs: one row per session, table and first row holding it. A row a
-- fork copied from its parent is listed for the parent (id_lookup) and, marked with the
-- parent's id in copied_from, for the fork (copied_ids).
SELECT session_id, id_kind, table_name, row_id, copied_from
FROM (
    SELECT session_id, id_kind, table_name, row_id, NULL AS copied_from
    FROM id_lookup
    WHERE value = :value
    UNION ALL
    SELECT c.session_id, c.id_kind, c.table_name, c.row_id, l.inherited_from AS copied_from
    FROM copied_ids AS c
    LEFT JOIN ledgers AS l ON l.session_id = c.session_id
    WHERE c.value = :value
)
ORDER BY session_id, table_name, row_id
LIMIT :limit
