-- What each stored verdict was computed from.
SELECT session_id, ledger_size, ledger_mtime_ns, ledger_wal_size, ledger_wal_mtime_ns, row_sig
FROM session_checks
