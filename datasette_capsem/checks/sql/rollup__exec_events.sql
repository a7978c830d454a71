-- main.db rollup figure from exec_events.
SELECT COUNT(*) AS exec_count FROM exec_events
