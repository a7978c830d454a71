-- Broken ask lifecycles (spec §6.2 #12, the error cases). Running counts over each ask's
-- rows in time order say, at every answer, how many pending rows and answers came before.
WITH ordered AS (
    SELECT
        id,
        status,
        SUM(status = 'pending') OVER w AS pending_so_far,
        SUM(status IN ('approved', 'denied')) OVER w AS answers_so_far
    FROM security_ask_events
    WINDOW w AS (PARTITION BY ask_id ORDER BY timestamp_unix_ms, id ROWS UNBOUNDED PRECEDING)
),
problems AS (
    SELECT id, 'answered without an earlier pending row' AS reason
    FROM ordered
    WHERE status IN ('approved', 'denied') AND pending_so_far = 0
    UNION ALL
    SELECT id, 'answered more than once'
    FROM ordered
    WHERE status IN ('approved', 'denied') AND answers_so_far > 1
    UNION ALL
    SELECT id, 'no rule with action ask for this event_id'
    FROM security_ask_events
    WHERE event_id NOT IN (
        SELECT event_id FROM security_rule_events WHERE rule_action = 'ask' AND event_id IS NOT NULL
    )
)
SELECT id, group_concat(reason, '; ') AS reason
FROM problems
GROUP BY id
ORDER BY id
