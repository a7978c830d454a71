INSERT INTO id_lookup (session_id, value, id_kind, table_name, row_id) VALUES (?, ?, ?, ?, ?)
