INSERT INTO session_checks (session_id, home, session_name, kind, created_at, profile, verdict, errors,
                            warnings, infos, problem, era, checked_at, check_ms, ledger_size,
                            ledger_mtime_ns, ledger_wal_size, ledger_wal_mtime_ns, row_sig)
VALUES (:session_id, :home, :session_name, :kind, :created_at, :profile, :verdict, :errors, :warnings,
        :infos, :problem, :era, :checked_at, :check_ms, :ledger_size, :ledger_mtime_ns,
        :ledger_wal_size, :ledger_wal_mtime_ns, :row_sig)
