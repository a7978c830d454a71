-- What each indexed ledger looked like when it was read, and the fork parent it depended on.
SELECT session_id, ledger_path, size, mtime_ns, wal_size, wal_mtime_ns, parent_key FROM ledgers
