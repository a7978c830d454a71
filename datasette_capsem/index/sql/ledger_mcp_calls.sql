-- The legacy mcp_calls table (before 2026-06-24; kept in migrated files): MCP tool calls.
SELECT id AS row_id,
       {tool_name} AS tool_name,
       'mcp' AS origin,
       {server_name} AS server_name,
       date({timestamp}) AS day,
       {duration_ms} AS duration_ms,
       {decision} AS decision,
       NULL AS status,
       (COALESCE({decision}, 'allowed') != 'allowed' OR {error_message} IS NOT NULL) AS failed
FROM mcp_calls
WHERE {tool_name} IS NOT NULL AND {own}
