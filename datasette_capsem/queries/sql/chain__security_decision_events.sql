SELECT strftime('%Y-%m-%dT%H:%M:%fZ', t.timestamp_unix_ms / 1000.0, 'unixepoch') AS time,
       'security_decision_events' AS table_name, t.id AS row_id, t.event_id AS event_id,
       {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       NULL AS model_call_id,
       printf('decision at %s by %s: %s on %s %s', t.stage, t.actor, t.effective_decision,
              t.event_type, t.event_id) AS summary
FROM security_decision_events AS t
WHERE t.{key} = :{key}
