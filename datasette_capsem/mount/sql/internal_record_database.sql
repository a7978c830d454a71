-- Record (or update) one attached database in Datasette's _internal catalog.
INSERT OR REPLACE INTO databases (database_name, path, is_memory, schema_version)
VALUES (?, ?, ?, ?)
