-- SQLite's own consistency check; up to 20 problems, 'ok' when there are none.
PRAGMA integrity_check(20)
