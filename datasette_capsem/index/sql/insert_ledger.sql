INSERT INTO ledgers (session_id, home, session_name, kind, ledger_path, era, size, mtime_ns, wal_size,
                     wal_mtime_ns, indexed_at, index_ms, problem, inherited_from,
                     inherited_rows, inherited_problem, parent_key)
VALUES (:session_id, :home, :session_name, :kind, :ledger_path, :era, :size, :mtime_ns, :wal_size,
        :wal_mtime_ns, :indexed_at, :index_ms, :problem, :inherited_from, :inherited_rows,
        :inherited_problem, :parent_key)
