-- Model items that point at a missing model call, tool call or tool response (spec §6.2 #7).
WITH problems AS (
    SELECT id, 'model call missing' AS reason
    FROM model_items
    WHERE model_call_id NOT IN (SELECT id FROM model_calls)
    UNION ALL
    SELECT item.id, 'no tool_calls row for this call_id and model call'
    FROM model_items AS item
    LEFT JOIN (  -- an anti-join: orphan_tool_responses.sql says why
        SELECT DISTINCT call_id, model_call_id FROM tool_calls
    ) AS called
        ON called.call_id = item.call_id AND called.model_call_id = item.model_call_id
    WHERE item.kind = 'tool_call' AND called.call_id IS NULL
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
