-- Tool responses Capsem could not pair with a call for this provider (a writer habit, not a
-- broken ledger; spec §4.3), with the habit that explains each.
SELECT u.id, tr.model_call_id, tr.call_id, u.habit AS reason
FROM (
    /* include: unpairable_responses */
) AS u
JOIN tool_responses AS tr ON tr.id = u.id
ORDER BY u.id
