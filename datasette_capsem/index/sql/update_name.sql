UPDATE ledgers SET session_name = ?1, kind = ?2
WHERE session_id = ?3 AND (session_name IS NOT ?1 OR kind IS NOT ?2)
