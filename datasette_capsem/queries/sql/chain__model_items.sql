-- Model items tagged with the key, or owned by one of the chain's model calls.
SELECT t.timestamp AS time, 'model_items' AS table_name, t.id AS row_id,
       {opt:t.event_id} AS event_id, {opt:t.trace_id} AS trace_id, {opt:t.turn_id} AS turn_id,
       t.model_call_id AS model_call_id,
       printf('model call %s item #%s %s %s', t.model_call_id, t.item_index, t.kind,
              COALESCE(t.tool_name, substr(t.content, 1, 80))) AS summary
FROM model_items AS t
WHERE t.{key} = :{key}
   OR t.model_call_id IN (SELECT id FROM model_calls WHERE {key} = :{key})
