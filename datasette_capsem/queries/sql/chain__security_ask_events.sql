SELECT strftime('%Y-%m-%dT%H:%M:%fZ', t.timestamp_unix_ms / 1000.0, 'unixepoch') AS time,
       'security_ask_events' AS table_name, t.id AS row_id, t.event_id AS event_id,
       {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       NULL AS model_call_id,
       printf('ask %s %s (%s)', t.ask_id, t.status, t.rule_id) AS summary
FROM security_ask_events AS t
WHERE t.{key} = :{key}
