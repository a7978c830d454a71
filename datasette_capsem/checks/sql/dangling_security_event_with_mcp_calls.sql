-- Security rule rows whose event_id is missing from the table their event type maps to
-- (spec §6.2 #11), on a file that keeps MCP traffic in mcp_calls too (2026-06-06 to 06-24,
-- and migrated files): an mcp.tool_call row may name a tool_calls row or an mcp_calls row.
-- Each lookup is an uncorrelated IN list, built once per table.
SELECT id, 'no ' || event_type || ' row with event_id ' || event_id AS reason
FROM security_rule_events
WHERE CASE
    WHEN event_type = 'http.request' THEN
        event_id NOT IN (SELECT event_id FROM net_events WHERE event_id IS NOT NULL)
    WHEN event_type = 'dns.query' THEN
        event_id NOT IN (SELECT event_id FROM dns_events WHERE event_id IS NOT NULL)
    WHEN event_type = 'model.call' THEN
        event_id NOT IN (SELECT event_id FROM model_calls WHERE event_id IS NOT NULL)
    WHEN event_type = 'mcp.tool_call' THEN
        event_id NOT IN (SELECT event_id FROM tool_calls WHERE event_id IS NOT NULL)
        AND event_id NOT IN (SELECT event_id FROM mcp_calls WHERE event_id IS NOT NULL)
    WHEN event_type IN ('file.event', 'file.import', 'file.export') THEN
        event_id NOT IN (SELECT event_id FROM fs_events WHERE event_id IS NOT NULL)
    WHEN event_type IN ('process.exec', 'process.exec_complete') THEN
        event_id NOT IN (SELECT event_id FROM exec_events WHERE event_id IS NOT NULL)
    WHEN event_type = 'process.audit' THEN
        event_id NOT IN (SELECT event_id FROM audit_events WHERE event_id IS NOT NULL)
    WHEN event_type = 'credential.substitution' THEN
        event_id NOT IN (SELECT event_id FROM substitution_events WHERE event_id IS NOT NULL)
    ELSE 0
END
ORDER BY id
