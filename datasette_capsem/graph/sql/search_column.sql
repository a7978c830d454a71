-- Rows of one table whose id column equals a value (cross-session search fallback).
SELECT {columns}
FROM {table}
WHERE {column} = :value
LIMIT :limit
