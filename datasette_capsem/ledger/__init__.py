"""The ledger model: what a session.db holds, learned by introspection (it has no version)."""

from datasette_capsem.ledger.schema import LedgerSchema, read_schema

__all__ = ["LedgerSchema", "read_schema"]
