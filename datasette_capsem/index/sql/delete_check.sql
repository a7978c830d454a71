-- Forget one session's stored verdict and findings (before re-checking or when it is gone).
DELETE FROM session_findings WHERE session_id = :session_id;
DELETE FROM session_checks WHERE session_id = :session_id;
