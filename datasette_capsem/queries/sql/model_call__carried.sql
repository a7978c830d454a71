-- Tool results this call sent to the model in its own request.
SELECT 4 AS role_rank, 'response carried in this request' AS role,
       'tool_responses' AS table_name, t.id AS row_id, NULL AS time, t.call_id AS call_id,
       printf('result%s: %s', CASE WHEN t.is_error THEN ' (error)' ELSE '' END,
              substr(t.content_preview, 1, 120)) AS detail
FROM tool_responses AS t
WHERE t.model_call_id = :model_call_id
