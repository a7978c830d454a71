-- Rows of one table whose id column equals a value (cross-session search fallback).
SELECT /*COLUMNS*/
FROM /*TABLE*/
WHERE /*COLUMN*/ = :value
LIMIT :limit
