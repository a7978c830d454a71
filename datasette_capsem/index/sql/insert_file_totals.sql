INSERT INTO file_totals (session_id, requests, allowed_requests, denied_requests,
    error_requests, model_calls, input_tokens, output_tokens, cache_read_tokens, thinking_tokens,
    cost_usd, tool_calls, mcp_calls, file_events, exec_events, audit_events, dns_queries,
    first_event_at, last_event_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
