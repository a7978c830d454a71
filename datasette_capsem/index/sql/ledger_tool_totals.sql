-- All tool calls (Capsem's rollup counts every origin) and those seen as MCP tools/call.
SELECT COUNT(*) AS tool_calls,
       COALESCE(SUM({opt:origin} = 'mcp'), 0) AS mcp_calls,
       MAX(NULLIF({opt:timestamp}, '')) AS last_at
FROM tool_calls
WHERE {own}
