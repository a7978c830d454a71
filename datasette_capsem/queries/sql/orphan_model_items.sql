-- Model items that point at a missing model call, tool call or tool response (spec §6.2 #7).
WITH problems AS (
    SELECT id, 'model call missing' AS reason
    FROM model_items
    WHERE model_call_id NOT IN (SELECT id FROM model_calls)
    UNION ALL
    SELECT id, 'no tool_calls row for this call_id and model call'
    FROM model_items
    WHERE kind = 'tool_call'
      AND NOT EXISTS (  -- not a row-value NOT IN: see orphan_tool_responses.sql
          SELECT 1 FROM tool_calls AS tc
          WHERE tc.call_id = model_items.call_id AND tc.model_call_id = model_items.model_call_id
      )
    UNION ALL
    SELECT id, 'no tool_responses row for this call_id'
    FROM model_items
    WHERE kind = 'tool_response'
      AND call_id NOT IN (SELECT call_id FROM tool_responses WHERE call_id IS NOT NULL)
)
SELECT
    mi.id,
    mi.model_call_id,
    mi.kind,
    mi.item_index,
    mi.call_id,
    mi.trace_id,
    group_concat(problems.reason, '; ') AS reason
FROM problems
JOIN model_items AS mi ON mi.id = problems.id
GROUP BY mi.id
ORDER BY mi.id
