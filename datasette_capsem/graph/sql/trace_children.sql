-- Rows of a child table (tool_calls, tool_responses, model_items) that belong to one trace:
-- tagged with its trace_id, or owned by one of its model calls (an untagged row still counts).
SELECT {columns}
FROM {table}
WHERE trace_id = :trace_id
   OR model_call_id IN (SELECT value FROM json_each(:model_call_ids))
ORDER BY id
