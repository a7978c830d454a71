-- Every session row of main.db; columns vary by schema version, so callers read them by name.
SELECT * FROM sessions ORDER BY created_at DESC, id
