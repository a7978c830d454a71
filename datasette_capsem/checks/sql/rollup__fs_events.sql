-- main.db rollup figure from fs_events.
SELECT COUNT(*) AS total_file_events FROM fs_events
