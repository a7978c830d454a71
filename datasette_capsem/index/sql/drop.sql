-- Tables of an index written by an older plugin version; dropped and rebuilt from the ledgers.
DROP TABLE IF EXISTS ledgers;
DROP TABLE IF EXISTS session_totals;
DROP TABLE IF EXISTS file_totals;
DROP TABLE IF EXISTS ledger_aliases;
DROP TABLE IF EXISTS model_usage;
DROP TABLE IF EXISTS tool_calls;
DROP TABLE IF EXISTS failing_domains;
DROP TABLE IF EXISTS id_lookup;
DROP TABLE IF EXISTS copied_ids;
DROP TABLE IF EXISTS index_meta;
DROP TABLE IF EXISTS text_search;
DROP TABLE IF EXISTS text_rows;
DROP TABLE IF EXISTS session_checks;
DROP TABLE IF EXISTS session_findings;
DROP TABLE IF EXISTS policy_events;
