UPDATE session_checks SET session_name = ?1, kind = ?2, created_at = ?3
WHERE session_id = ?4 AND (session_name IS NOT ?1 OR kind IS NOT ?2 OR created_at IS NOT ?3)
