INSERT INTO policy_events (session_id, category, source_table, day, subject, detail, events,
    first_at, last_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
