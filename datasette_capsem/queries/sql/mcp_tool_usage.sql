-- MCP tools/call outcomes per server and tool, from whichever tables the file has.
SELECT
    server_name,
    tool_name,
    group_concat(DISTINCT source) AS source,
    COUNT(*) AS calls,
    SUM(outcome = 'ok') AS ok,
    SUM(outcome = 'denied') AS denied,
    SUM(outcome = 'error') AS errors,
    COALESCE(SUM(duration_ms), 0) AS total_duration_ms,
    ROUND(AVG(duration_ms), 1) AS avg_duration_ms,
    COALESCE(SUM(bytes_sent), 0) AS bytes_sent,
    COALESCE(SUM(bytes_received), 0) AS bytes_received
FROM (
    {parts}
)
GROUP BY server_name, tool_name
ORDER BY calls DESC, server_name, tool_name
