-- What each indexed ledger looked like when it was read.
SELECT session_id, ledger_path, size, mtime_ns, wal_size, wal_mtime_ns FROM ledgers
