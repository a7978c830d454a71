INSERT INTO ledger_aliases (session_id, owner_id) VALUES (?, ?)
