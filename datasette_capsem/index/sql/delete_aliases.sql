DELETE FROM ledger_aliases
