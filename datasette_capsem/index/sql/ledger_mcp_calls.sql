-- The legacy mcp_calls table (before 2026-06-24; kept in migrated files): MCP tool calls.
SELECT id AS row_id,
       {opt:tool_name} AS tool_name,
       'mcp' AS origin,
       {opt:server_name} AS server_name,
       date({opt:timestamp}) AS day,
       {opt:duration_ms} AS duration_ms,
       {opt:decision} AS decision,
       NULL AS status,
       (COALESCE({opt:decision}, 'allowed') != 'allowed' OR {opt:error_message} IS NOT NULL) AS failed
FROM mcp_calls
WHERE {opt:tool_name} IS NOT NULL AND {own}
