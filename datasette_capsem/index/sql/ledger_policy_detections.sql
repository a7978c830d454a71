-- Security detections per day, rule and level: rule matches with a detection level above none.
SELECT 'detection' AS category, 'security_rule_events' AS source_table,
       strftime('%Y-%m-%d', CAST({opt:timestamp_unix_ms} AS INTEGER) / 1000, 'unixepoch') AS day,
       {opt:rule_id} AS subject, {opt:detection_level} AS detail, COUNT(*) AS events,
       strftime('%Y-%m-%dT%H:%M:%fZ', MIN(CAST({opt:timestamp_unix_ms} AS INTEGER)) / 1000.0,
                'unixepoch') AS first_at,
       strftime('%Y-%m-%dT%H:%M:%fZ', MAX(CAST({opt:timestamp_unix_ms} AS INTEGER)) / 1000.0,
                'unixepoch') AS last_at
FROM security_rule_events
WHERE {opt:detection_level} IS NOT NULL AND {opt:detection_level} <> 'none' AND {own}
GROUP BY 3, 4, 5
