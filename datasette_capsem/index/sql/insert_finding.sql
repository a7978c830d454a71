INSERT INTO session_findings (session_id, kind, severity, title, check_id, table_name, row_count,
                              row_ids, failed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
