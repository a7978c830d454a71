INSERT INTO copied_ids (session_id, value, id_kind, table_name, row_id) VALUES (?, ?, ?, ?, ?)
