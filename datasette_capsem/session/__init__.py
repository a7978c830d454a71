"""What the session pages read from a ledger, apart from the trace model (`graph/`): the
overview's counts and turns, Capsem's Stats-tab summaries, the timeline, the newest rows of a
live ledger (follow), search by id, an event's relations, and two turns compared. Each reads
through `graph/ledgersql.py` and the trace model's rows; nothing here draws a trace."""
