SELECT event_id FROM mcp_calls WHERE event_id IS NOT NULL
