-- SQLite's quick consistency check (linear time: it skips the index-vs-table cross-checks
-- integrity_check makes); up to 20 problems, 'ok' when there are none. The overview page's
-- quick profile runs it; the full check page and the CLI run integrity_check.
PRAGMA quick_check(20)
