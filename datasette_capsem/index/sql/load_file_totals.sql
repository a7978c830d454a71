-- Forks' whole-file totals (their parent's copied rows included), as main.db rolls them up.
SELECT * FROM file_totals
