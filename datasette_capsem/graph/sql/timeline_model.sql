-- The model layer of a session's timeline (session/timeline.py): one row per model call.
SELECT {opt:timestamp} AS at, 'model' AS layer, id AS row_id,
       COALESCE({opt:provider}, '') || ' ' || COALESCE({opt:model}, '') || ' · '
       || COALESCE({opt:input_tokens}, 0) || ' in / '
       || COALESCE({opt:output_tokens}, 0) || ' out' AS text,
       {opt:stop_reason} AS status, {opt:duration_ms} AS duration_ms, {opt:trace_id} AS trace_id,
       {opt:event_id} AS event_id
FROM {table}
