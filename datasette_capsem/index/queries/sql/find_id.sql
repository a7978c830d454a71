SELECT i.value,
       i.id_kind,
       i.session_id,
       l.session_name,
       i.table_name,
       i.row_id
FROM id_lookup AS i
LEFT JOIN ledgers AS l ON l.session_id = i.session_id
WHERE i.value = :value
ORDER BY i.session_id, i.table_name, i.row_id
LIMIT 1000
