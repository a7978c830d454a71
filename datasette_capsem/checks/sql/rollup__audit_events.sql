-- main.db rollup figure from audit_events.
SELECT COUNT(*) AS audit_event_count FROM audit_events
