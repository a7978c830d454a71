-- Ids whose ledger file is indexed under another session id.
SELECT session_id, owner_id FROM ledger_aliases
