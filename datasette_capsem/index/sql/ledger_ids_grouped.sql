-- Identifiers many rows share (trace_id, call_id): one entry per value, at its first row.
-- All-digit call ids are JSON-RPC request ids ("1", "2"), which every MCP session reuses.
SELECT {column} AS value, MIN(id) AS row_id
FROM {table}
WHERE typeof({column}) = 'text' AND {column} != ''
  AND ({numeric_ok} OR {column} GLOB '*[^0-9]*')
  AND {own}
GROUP BY {column}
