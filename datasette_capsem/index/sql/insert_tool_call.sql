INSERT INTO tool_calls (session_id, source_table, row_id, tool_name, origin, server_name, day,
    duration_ms, decision, status, failed)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
