-- Tool calls Capsem could not pair with their result for this provider (a writer habit, not a
-- broken ledger; spec §4.3), with the habit that explains each.
SELECT u.id, tc.model_call_id, tc.call_id, tc.tool_name, u.habit AS reason
FROM (
    /* include: unpairable_calls */
) AS u
JOIN tool_calls AS tc ON tc.id = u.id
ORDER BY u.id
