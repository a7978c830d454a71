"""Reading one ledger for the index: its figures, its searchable text, its policy events.

The file is opened through `readonly` (never written); a fork's parent is attached so the
rows it copied are left out (`extract.Inherited`).
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasette_capsem import readonly
from datasette_capsem.catalog import Session
from datasette_capsem.checks.runner import lending
from datasette_capsem.config import Settings
from datasette_capsem.index import verdicts
from datasette_capsem.index.extract import (
    PARENT_SCHEMA,
    Inherited,
    LedgerFacts,
    read_parent_tables,
)
from datasette_capsem.index.extract import read_facts as read_figures
from datasette_capsem.index.plan import Parent
from datasette_capsem.index.text import read_texts
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.mount.ledger_db import read_shared_schema


@dataclass
class LedgerRead:
    facts: Any = None
    era: str | None = None
    problem: str | None = None
    inherited_problem: str | None = None  # a fork whose parent's rows could not be left out
    checked: verdicts.Checked | None = None  # the quick check, when asked (`read_ledger`)


def _attach_parent(conn: sqlite3.Connection, parent: Parent, cache_dir: Path):
    """(Inherited, None) with the parent's ledger attached read-only, or (None, why not)."""
    try:
        uri = readonly.sqlite_uri(readonly.inspect_file(parent.ledger_path), cache_dir)
        conn.execute(f"ATTACH DATABASE ? AS {PARENT_SCHEMA}", (uri,))
    except readonly.LedgerUnavailable as error:
        return None, f"parent {parent.session_id}: {error.kind}: {error.detail}"
    except (sqlite3.Error, OSError) as error:
        return None, f"parent {parent.session_id}: {error}"
    try:
        tables = read_parent_tables(conn)
    except sqlite3.Error as error:
        _detach(conn)
        return None, f"parent {parent.session_id}: unreadable: {error}"
    return Inherited(tables), None


def read_facts(conn, schema, inherited: Inherited | None = None) -> LedgerFacts:
    """The figures and ids of one ledger, and its searchable text (masked); TEXT decoded in C
    unless the file holds invalid UTF-8 (`readonly.tolerant`)."""

    def read() -> LedgerFacts:
        facts = read_figures(conn, schema, inherited)
        facts.texts = read_texts(conn, schema, inherited)
        return facts

    return readonly.tolerant(conn, read)


def _detach(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        conn.execute(f"DETACH DATABASE {PARENT_SCHEMA}")


def read_ledger(
    session: Session,
    cache_dir: Path,
    parent: Parent | None = None,
    check: Settings | None = None,
) -> LedgerRead:
    """The facts of one ledger, opened only through the read-only opener (as is a fork's
    parent, attached to leave the copied rows out); read again when it could not be read
    while its writer changed it (`readonly.settled`), so a passing moment is not recorded.

    With `check` (the settings of the refresh), the session's quick check (`verdicts.check`,
    which stores its report) runs on the same connection first, before a parent is attached:
    the very report a check opening the file itself gives, without a second open and read
    of the file. A ledger that cannot be opened is left unchecked here (`checked` None): the
    caller checks it as any other session, which says why it is unreadable."""
    return readonly.settled(
        session.ledger_path,
        lambda: _read_once(session, cache_dir, parent, check),
        failed=lambda read: read.problem is not None,
    )


def _read_once(
    session: Session, cache_dir: Path, parent: Parent | None, check: Settings | None
) -> LedgerRead:
    try:
        conn = readonly.open_once(session.ledger_path, cache_dir)  # read_ledger tries again
    except readonly.LedgerUnavailable as error:
        return LedgerRead(problem=f"{error.kind}: {error.detail}")
    try:
        try:
            # Table and column names decoded in C (readonly.tolerant): a Python call per name
            # was a tenth of the CPU of reading a small ledger. Introspected once per schema
            # text (`read_shared_schema`): its `pragma_table_info` per table was the costliest
            # statement a small ledger's build sent.
            schema = readonly.tolerant(conn, lambda: read_shared_schema(conn))
        except sqlite3.Error as error:
            return LedgerRead(problem=f"unreadable: {error}")
        checked = None
        if check is not None:
            with lending(session.ledger_path, conn, schema):
                checked = verdicts.check(session, check)
        read = _read_facts_of(conn, schema, cache_dir, parent)
        read.checked = checked
        return read
    finally:
        conn.close()


def _read_facts_of(
    conn: sqlite3.Connection, schema: LedgerSchema, cache_dir: Path, parent: Parent | None
) -> LedgerRead:
    try:
        inherited, inherited_problem = None, None
        if parent is not None:
            inherited, inherited_problem = _attach_parent(conn, parent, cache_dir)
        if inherited is not None:
            try:
                facts = read_facts(conn, schema, inherited)
                return LedgerRead(facts, schema.era)
            except sqlite3.Error as error:  # the parent fails mid-read: count the whole file
                _detach(conn)
                inherited_problem = f"parent {parent.session_id}: unreadable: {error}"
        return LedgerRead(read_facts(conn, schema), schema.era, None, inherited_problem)
    except sqlite3.Error as error:
        return LedgerRead(problem=f"unreadable: {error}")
