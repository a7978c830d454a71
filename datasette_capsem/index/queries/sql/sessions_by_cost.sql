SELECT l.session_id,
       l.session_name,
       l.kind,
       l.era,
       t.model_calls,
       t.input_tokens,
       t.output_tokens,
       ROUND(t.cost_usd, 6) AS cost_usd,
       t.requests,
       t.tool_calls,
       t.mcp_calls,
       t.file_events,
       t.first_event_at,
       t.last_event_at,
       l.inherited_from,
       l.inherited_rows,
       l.problem
FROM ledgers AS l
LEFT JOIN session_totals AS t ON t.session_id = l.session_id
ORDER BY t.cost_usd DESC, l.session_id
LIMIT 1000
