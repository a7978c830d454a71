INSERT INTO text_rows (session_id, kind, table_name, row_id, event_id, trace_id, model_call_id,
                       provider, model, at, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
