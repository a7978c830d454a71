-- Tool calls policy stopped per day and tool: decision 'denied' (or 'blocked'), or a policy
-- action 'block'. {table} is tool_calls or the legacy mcp_calls.
SELECT 'blocked_tool' AS category, {table_name} AS source_table,
       substr({opt:timestamp}, 1, 10) AS day, {opt:tool_name} AS subject,
       COALESCE({opt:policy_rule}, {opt:decision}, {opt:policy_action}) AS detail,
       COUNT(*) AS events, MIN({opt:timestamp}) AS first_at, MAX({opt:timestamp}) AS last_at
FROM {table}
WHERE ({opt:decision} IN ('denied', 'blocked') OR {opt:policy_action} = 'block') AND {own}
GROUP BY 3, 4, 5
