SELECT 1 AS role_rank, 'item' AS role, 'model_items' AS table_name, t.id AS row_id,
       t.timestamp AS time, NULLIF({opt:t.call_id}, '') AS call_id,
       printf('#%s %s %s', t.item_index, t.kind,
              COALESCE(t.tool_name, substr(t.content, 1, 120))) AS detail
FROM model_items AS t
WHERE t.model_call_id = :model_call_id
