-- MCP calls of a file from before 2026-06-24, when they lived in mcp_calls (spec §4.5).
SELECT {columns}
FROM mcp_calls
ORDER BY timestamp DESC, id DESC
LIMIT :limit
