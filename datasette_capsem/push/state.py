"""What push-otlp has delivered to one endpoint: a small SQLite file in the plugin's cache.

One file per (home, endpoint) under `<cache>/push-otlp/`, never in the Capsem home. Three
tables, each written only after the receiver acknowledged the spans concerned:

* `spans`: (OTLP trace id, span id) -> digest of the span as sent (attributes, times, the
  resource but for the session id) and the session that sent it. A span is sent again only
  when its digest changes (a root span whose totals grew, a tool span whose response arrived),
  never twice unchanged. Keyed without the session because a forked session's ledger starts as
  a copy of its parent's: the copied turns, same trace and span ids, were delivered with the
  parent and are not sent again under the fork.
* `traces`: (session, Capsem trace id) -> fingerprint of the ledger rows it was exported from.
  An unchanged fingerprint skips the trace without reading its rows.
* `sessions`: session -> the ledger file's signature (size and mtime of the file and its WAL)
  when every trace of it had been delivered. An unchanged signature skips the whole file.

Each acknowledged batch is committed at once, so a crash or a network failure loses at most
the batch in flight: a re-run sends what is missing (at-least-once for that one batch).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

from datasette_capsem.ledger.dialect import render_sql

SCHEMA = """
CREATE TABLE IF NOT EXISTS spans (
    trace_hex TEXT NOT NULL,
    span_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    session_id TEXT NOT NULL,
    sent_at REAL NOT NULL,
    PRIMARY KEY (trace_hex, span_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS traces (
    session_id TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    spans INTEGER NOT NULL,
    sent_at REAL NOT NULL,
    PRIMARY KEY (session_id, trace_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS claims (
    trace_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    signature TEXT NOT NULL,
    traces INTEGER NOT NULL,
    spans INTEGER NOT NULL,
    sent_at REAL NOT NULL
) WITHOUT ROWID;
"""


def state_path(cache_dir: Path, endpoint: str) -> Path:
    """The delivery record of one endpoint (the settings' cache dir is already per home)."""
    key = hashlib.sha256(endpoint.encode("utf-8")).hexdigest()[:16]
    return Path(cache_dir) / "push-otlp" / f"{key}.sqlite"


class DeliveryState:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.executescript(SCHEMA)

    def close(self) -> None:
        self.conn.close()

    # -- reads ----------------------------------------------------------------------------

    def session(self, session_id: str) -> tuple[str, int, int] | None:
        """(signature, traces, spans) recorded when the session was last complete."""
        row = self.conn.execute(
            "SELECT signature, traces, spans FROM sessions WHERE session_id = ?", [session_id]
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def trace_fingerprints(self, session_id: str) -> dict[str, tuple[str, int]]:
        rows = self.conn.execute(
            "SELECT trace_id, fingerprint, spans FROM traces WHERE session_id = ?", [session_id]
        )
        return {trace_id: (fingerprint, spans) for trace_id, fingerprint, spans in rows}

    def claimant(self, trace_id: str) -> str | None:
        """The session whose spans of Capsem trace `trace_id` go under its plain OTLP id."""
        row = self.conn.execute("SELECT session_id FROM claims WHERE trace_id = ?", [trace_id])
        found = row.fetchone()
        return found[0] if found else None

    def claim(self, trace_id: str, session_id: str) -> None:
        with self._transaction():
            self.conn.execute(
                "INSERT OR IGNORE INTO claims (trace_id, session_id) VALUES (?, ?)",
                [trace_id, session_id],
            )

    def span_digests(self, trace_hex: str) -> dict[str, str]:
        rows = self.conn.execute(
            "SELECT span_id, digest FROM spans WHERE trace_hex = ?", [trace_hex]
        )
        return dict(rows.fetchall())

    def counts(self) -> dict[str, int]:
        return {
            table: self.conn.execute(
                render_sql("SELECT count(*) FROM {table}", table=table)
            ).fetchone()[0]
            for table in ("sessions", "traces", "spans")  # constants, not data
        }

    # -- writes (after an acknowledgement) ------------------------------------------------

    def record_spans(self, rows: list[tuple[str, str, str, str]]) -> None:
        """(trace_hex, span_id, digest, session) of spans the receiver acknowledged."""
        now = time.time()
        with self._transaction():
            self.conn.executemany(
                "INSERT OR REPLACE INTO spans (trace_hex, span_id, digest, session_id, sent_at)"
                " VALUES (?, ?, ?, ?, ?)",
                [(*row, now) for row in rows],
            )

    def record_trace(self, session_id: str, trace_id: str, fingerprint: str, spans: int) -> None:
        with self._transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO traces (session_id, trace_id, fingerprint, spans, sent_at)"
                " VALUES (?, ?, ?, ?, ?)",
                [session_id, trace_id, fingerprint, spans, time.time()],
            )

    def record_session(self, session_id: str, signature: str, traces: int, spans: int) -> None:
        with self._transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO sessions (session_id, signature, traces, spans, sent_at)"
                " VALUES (?, ?, ?, ?, ?)",
                [session_id, signature, traces, spans, time.time()],
            )

    def _transaction(self):
        return _Transaction(self.conn)


class _Transaction:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, _value, _tb) -> None:
        self.conn.execute("ROLLBACK" if kind else "COMMIT")
