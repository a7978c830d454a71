-- Sessions whose stored verdict is 'unreadable' (through idx_session_checks_verdict), newest
-- first, with the reason: the findings page's "Unreadable ledgers".
SELECT session_id, session_name, kind AS session_kind, created_at, problem
FROM session_checks
WHERE verdict = 'unreadable'
ORDER BY created_at DESC, session_id DESC
