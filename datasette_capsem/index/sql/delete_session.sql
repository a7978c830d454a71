-- Forget everything indexed from one session's ledger (before re-indexing or when it is gone).
INSERT INTO text_search (text_search, rowid, body)
    SELECT 'delete', id, body FROM text_rows WHERE session_id = :session_id;
DELETE FROM text_rows WHERE session_id = :session_id;
DELETE FROM session_totals WHERE session_id = :session_id;
DELETE FROM file_totals WHERE session_id = :session_id;
DELETE FROM model_usage WHERE session_id = :session_id;
DELETE FROM tool_calls WHERE session_id = :session_id;
DELETE FROM failing_domains WHERE session_id = :session_id;
DELETE FROM id_lookup WHERE session_id = :session_id;
DELETE FROM copied_ids WHERE session_id = :session_id;
DELETE FROM ledgers WHERE session_id = :session_id;
DELETE FROM policy_events WHERE session_id = :session_id;
