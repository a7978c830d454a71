"""The cross-session index: a derived SQLite database built from every on-disk ledger.

`IndexService` keeps it fresh (CLI `datasette capsem index`, or a background thread in the
server) and answers `lookup`, `covered_sessions` and `freshness`; `index_queries()` gives the
canned queries of the Datasette database `index`.
"""

from datasette_capsem.index.database import INDEX_DATABASE, IndexDatabase
from datasette_capsem.index.queries import index_queries
from datasette_capsem.index.service import IndexService, IndexSnapshot, RefreshReport

__all__ = [
    "INDEX_DATABASE",
    "IndexDatabase",
    "IndexService",
    "IndexSnapshot",
    "RefreshReport",
    "index_queries",
]
