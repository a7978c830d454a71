"""The index database file: schema, writes per ledger, and reads of what it holds.

It lives in the plugin's cache dir (never in the Capsem home) and is written only here, by
one refresh at a time per process; SQLite's locking covers a CLI refresh beside a server.
"""

from __future__ import annotations

import functools
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from datasette_capsem.index.extract import TOTAL_FIELDS, LedgerFacts
from datasette_capsem.redaction import MASKER_VERSION
from datasette_capsem.sqlfiles import load_sql

INDEX_FILENAME = "index.db"
# Bump when create.sql changes shape: an older file is then dropped and rebuilt.
SCHEMA_VERSION = 6  # 2: forks' inherited rows left out, aliases indexed once; 3: text search;
# 4: verdicts; 5: policy events; 6: sessions keyed by address (home label and id), `home` column
# The file's user_version also names the masker its text was masked by (index/text.py stores
# masked text): a file masked by another masker is dropped and rebuilt.
USER_VERSION = SCHEMA_VERSION * 100 + MASKER_VERSION
WRITER_CACHE_KIB = 64 * 1024
Fingerprint = tuple[int, int, int | None, int | None]


def index_path(cache_dir: Path) -> Path:
    return Path(cache_dir) / INDEX_FILENAME


@functools.cache
def _statements(name: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in load_sql(__package__, name).split(";") if s.strip())


def connect_writer(path: Path) -> sqlite3.Connection:
    """The one read-write connection of a refresh; creates the file and schema if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if conn.execute("PRAGMA user_version").fetchone()[0] != USER_VERSION:
        conn.executescript(load_sql(__package__, "drop"))
        conn.execute(f"PRAGMA user_version = {int(USER_VERSION)}")
    conn.executescript(load_sql(__package__, "create"))
    return conn


def cache_for_writes(conn: sqlite3.Connection) -> None:
    """Give the writer a big page cache, for a refresh that writes (ledgers read, verdicts).

    A full build inserts into indexes keyed by random ids (id_lookup) and full-text
    segments all over a file of hundreds of MB: with SQLite's default 2 MB cache the writes
    at 10,000 sessions cost 7.3 s of CPU, 5.6 s with this one. Pages are only cached as
    they are touched, and freed when the refresh closes the connection (the refresh then
    hands freed memory back, memory.release_memory). A refresh that only compares (what
    was stored against the home) keeps SQLite's default: it reads every row of `ledgers`
    and `session_checks`, tens of MB of pages at 100,000 sessions, which a big cache kept
    until the end of the refresh."""
    conn.execute(f"PRAGMA cache_size = -{int(WRITER_CACHE_KIB)}")


# Identifier rows (extract.read_ids): the same columns in both tables.
ID_INSERTS = {
    "id_lookup": "INSERT INTO id_lookup (session_id, value, id_kind, table_name, row_id) "
    "VALUES (?, ?, ?, ?, ?)",
    "copied_ids": "INSERT INTO copied_ids (session_id, value, id_kind, table_name, row_id) "
    "VALUES (?, ?, ?, ?, ?)",
}


def connect_reader(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


def stored_fingerprints(conn: sqlite3.Connection) -> dict[str, int]:
    """session id -> `ledger_key(ledger path, fingerprint, parent key)` of what was indexed.
    A number per ledger, not the three values (a refresh of 30,000 ledgers held ~12 MB of
    them at once for the comparison alone); the ids are interned (the catalog's strings)."""
    rows = conn.execute(
        "SELECT session_id, ledger_path, size, mtime_ns, wal_size, wal_mtime_ns, parent_key "
        "FROM ledgers"
    )
    return {
        sys.intern(row[0]): ledger_key(row[1], (row[2], row[3], row[4], row[5]), row[6])
        for row in rows
    }


def ledger_key(path: str, fingerprint: Fingerprint | None, parent_key: str) -> int:
    """What `stored_fingerprints` keeps of one indexed ledger, and what a refresh compares
    with it (a collision, at odds of 2**-64, would keep a ledger's figures until it changes
    again)."""
    return hash((path, tuple(fingerprint) if fingerprint is not None else None, parent_key))


def forget(conn: sqlite3.Connection, session_id: str) -> None:
    for statement in _statements("delete_session"):
        conn.execute(statement, {"session_id": session_id})


def _insert_many(conn, sql: str, session_id: str, rows: list[tuple]) -> None:
    if rows:
        conn.executemany(sql, [(session_id, *row) for row in rows])


def write_ledger(
    conn: sqlite3.Connection,
    ledger: dict[str, Any],
    facts: LedgerFacts | None,
    problem: str | None,
) -> None:
    """Replace one session's rows. `ledger` holds session_id, name, kind, path, era, fingerprint
    and, for a fork, inherited_from, inherited_problem and parent_key."""
    session_id = ledger["session_id"]
    forget(conn, session_id)
    size, mtime_ns, wal_size, wal_mtime_ns = ledger["fingerprint"]
    conn.execute(
        load_sql(__package__, "insert_ledger"),
        {
            **{k: ledger[k] for k in ("session_id", "session_name", "kind", "era")},
            "ledger_path": str(ledger["path"]),
            "size": size,
            "mtime_ns": mtime_ns,
            "wal_size": wal_size,
            "wal_mtime_ns": wal_mtime_ns,
            "indexed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "index_ms": ledger.get("index_ms"),
            "problem": problem,
            "inherited_from": ledger.get("inherited_from"),
            "inherited_rows": facts.inherited_rows if facts and facts.file_totals else None,
            "inherited_problem": ledger.get("inherited_problem"),
            "parent_key": ledger.get("parent_key") or "",
            "home": ledger.get("home") or "",
        },
    )
    if facts is None:
        return
    totals = [facts.totals.get(name) for name in TOTAL_FIELDS]
    conn.execute(load_sql(__package__, "insert_totals"), [session_id, *totals])
    if facts.file_totals is not None:
        whole = [facts.file_totals.get(name) for name in TOTAL_FIELDS]
        conn.execute(load_sql(__package__, "insert_file_totals"), [session_id, *whole])
    _insert_many(conn, load_sql(__package__, "insert_model_usage"), session_id, facts.model_usage)
    _insert_many(conn, load_sql(__package__, "insert_tool_call"), session_id, facts.tool_calls)
    _insert_many(
        conn, load_sql(__package__, "insert_failing_domain"), session_id, facts.failing_domains
    )
    _insert_many(conn, ID_INSERTS["id_lookup"], session_id, facts.ids)
    _insert_many(conn, ID_INSERTS["copied_ids"], session_id, facts.copied_ids)
    _insert_many(
        conn, load_sql(__package__, "insert_policy_event"), session_id, facts.policy_events
    )
    if facts.texts:
        _insert_many(conn, load_sql(__package__, "insert_text"), session_id, facts.texts)
        # External-content FTS5: the text lives once, in text_rows.
        conn.execute(
            "INSERT INTO text_search (rowid, body) "
            "SELECT id, body FROM text_rows WHERE session_id = :session_id",
            {"session_id": session_id},
        )


def stored_checks(conn: sqlite3.Connection) -> Iterator[tuple[str, int]]:
    """(session id, `check_key(ledger fingerprint, row signature)`) of each stored verdict,
    a row at a time: a refresh compares them as they are read rather than holding 100,000
    verdicts' inputs (tuples: ~35 MB at once; their hashes: a dict of ~8 MB for good). The
    ids are interned (the catalog's own strings)."""
    rows = conn.execute(
        "SELECT session_id, ledger_size, ledger_mtime_ns, ledger_wal_size, ledger_wal_mtime_ns, "
        "row_sig FROM session_checks"
    )
    for row in rows:
        yield sys.intern(row[0]), check_key((row[1], row[2], row[3], row[4]), row[5])


def check_key(fingerprint: Fingerprint | None, signature: str | None) -> int:
    """What `stored_checks` keeps of a stored verdict's inputs (a hash: a collision, at odds
    of 2**-64, would keep a verdict until the next full refresh)."""
    return hash((tuple(fingerprint) if fingerprint else (None,) * 4, signature))


def forget_check(conn: sqlite3.Connection, session_id: str) -> None:
    for statement in _statements("delete_check"):
        conn.execute(statement, {"session_id": session_id})


def write_check(
    conn: sqlite3.Connection,
    session: dict[str, Any],
    fingerprint: Fingerprint | None,
    row_sig: str,
    checked: Any,
) -> None:
    """Replace one session's verdict and findings. `session` holds session_id, session_name,
    kind and created_at; `checked` is a `verdicts.Checked`."""
    session_id = session["session_id"]
    forget_check(conn, session_id)
    size, mtime_ns, wal_size, wal_mtime_ns = fingerprint or (None, None, None, None)
    conn.execute(
        load_sql(__package__, "insert_check"),
        {
            "home": "",
            **session,
            "profile": "quick",
            "verdict": checked.verdict,
            "errors": checked.errors,
            "warnings": checked.warnings,
            "infos": checked.infos,
            "problem": checked.problem,
            "era": checked.era,
            "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "check_ms": round(checked.check_ms, 3),
            "ledger_size": size,
            "ledger_mtime_ns": mtime_ns,
            "ledger_wal_size": wal_size,
            "ledger_wal_mtime_ns": wal_mtime_ns,
            "row_sig": row_sig,
        },
    )
    _insert_many(conn, load_sql(__package__, "insert_finding"), session_id, checked.findings)


def update_check_names(conn: sqlite3.Connection, sessions: Iterable[tuple]) -> None:
    """Keep the verdicts' names, kinds and creation times current (registry renames):
    `sessions` gives (name, kind, created_at, session id), one at a time (100,000 tuples
    made at once, and a dict of them, were ~20 MB for a moment after every start)."""
    conn.executemany(
        "UPDATE session_checks SET session_name = ?1, kind = ?2, created_at = ?3 WHERE "
        "session_id = ?4 AND (session_name IS NOT ?1 OR kind IS NOT ?2 OR created_at IS NOT ?3)",
        sessions,
    )


def replace_aliases(conn: sqlite3.Connection, aliases: dict[str, str]) -> bool:
    """Store {alias id: owner id}; returns whether anything changed."""
    stored = dict(conn.execute(load_sql(__package__, "load_aliases")).fetchall())
    if stored == aliases:
        return False
    conn.execute("DELETE FROM ledger_aliases")
    conn.executemany(
        "INSERT INTO ledger_aliases (session_id, owner_id) VALUES (?, ?)", sorted(aliases.items())
    )
    return True


def update_names(conn: sqlite3.Connection, names: Iterable[tuple[str | None, str, str]]) -> None:
    """Keep displayed names and kinds current without re-reading ledgers (registry renames):
    `names` gives (name, kind, session id), one at a time."""
    conn.executemany(
        "UPDATE ledgers SET session_name = ?1, kind = ?2 "
        "WHERE session_id = ?3 AND (session_name IS NOT ?1 OR kind IS NOT ?2)",
        names,
    )


def set_meta(conn: sqlite3.Connection, **values: Any) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO index_meta (key, value) VALUES (?, ?)",
        [(key, str(value)) for key, value in values.items()],
    )


@contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A short-lived read-only connection, or None when no index was ever written."""
    if not path.exists():
        yield None
        return
    conn = connect_reader(path)
    try:
        yield conn
    finally:
        conn.close()
