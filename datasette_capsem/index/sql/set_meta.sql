INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)
