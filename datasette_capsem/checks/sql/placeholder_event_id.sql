-- Tool calls carrying the 06-12 migration placeholder event_id.
SELECT id FROM tool_calls WHERE event_id = '000000000000' ORDER BY id
