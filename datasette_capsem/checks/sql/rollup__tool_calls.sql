-- main.db rollup figure from tool_calls (every origin).
SELECT COUNT(*) AS total_tool_calls FROM tool_calls
