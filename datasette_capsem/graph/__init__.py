"""The identity graph of a trace, its waterfall, body decoding, search and OTLP export.

Pure Python over a sqlite3 connection (SQL in `graph/sql/`), so the web pages (through
`execute_fn`) and the command line share every line of it.
"""
