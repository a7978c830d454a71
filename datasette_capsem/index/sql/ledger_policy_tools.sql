-- Tool calls policy stopped per day and tool: decision 'denied' (or 'blocked'), or a policy
-- action 'block'. {table} is tool_calls or the legacy mcp_calls.
SELECT 'blocked_tool' AS category, {table_name} AS source_table,
       substr({timestamp}, 1, 10) AS day, {tool_name} AS subject,
       COALESCE({policy_rule}, {decision}, {policy_action}) AS detail,
       COUNT(*) AS events, MIN({timestamp}) AS first_at, MAX({timestamp}) AS last_at
FROM {table}
WHERE ({decision} IN ('denied', 'blocked') OR {policy_action} = 'block') AND {own}
GROUP BY 3, 4, 5
