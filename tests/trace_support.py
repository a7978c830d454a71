"""Helpers shared by the trace explorer's tests: ledger access, sessions by shape, URLs.

Expected values are read straight from the generated ledgers (through the plugin's read-only
opener, so a test never writes beside a Capsem file) and compared with what the pages serve.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from datasette_capsem.readonly import open_readonly
from tests.helpers import session_in, sessions_in


def session_url(session_id: str, rest: str = "") -> str:
    return f"/-/capsem/sessions/{quote(session_id, safe='')}{rest}"


def trace_url(session_id: str, trace_id: str, suffix: str = "") -> str:
    return session_url(session_id, f"/traces/{quote(trace_id, safe='')}{suffix}")


def event_url(session_id: str, event_id: str, suffix: str = "") -> str:
    return session_url(session_id, f"/events/{quote(event_id, safe='')}{suffix}")


@contextmanager
def ledger(home: Path, session: dict, cache_dir: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a session's ledger, rows as sqlite3.Row."""
    conn = open_readonly(home / session["ledger"], cache_dir)
    conn.row_factory = sqlite3.Row
    conn.text_factory = lambda data: data.decode("utf-8", "replace")
    try:
        yield conn
    finally:
        conn.close()


def by_id(manifest: dict, session_id: str) -> dict:
    return session_in(manifest, id=session_id)


def readable(manifest: dict) -> list[dict]:
    return sessions_in(manifest, has=("ledger",), lacks=("broken",))


def clean_current(manifest: dict) -> list[dict]:
    """Current-era sessions with traces and no injected defect."""
    return [
        s
        for s in readable(manifest)
        if s.get("era") == "head" and s.get("clean") and s.get("traces")
    ]


def of_era(manifest: dict, era: str) -> list[dict]:
    return [s for s in readable(manifest) if s.get("era") == era]


def hostile_session(manifest: dict) -> dict:
    """The session holding most hostile rows (payloads, huge and binary cells)."""
    counts: dict[str, int] = {}
    for entry in manifest["hostile"]:
        counts[entry["session"]] = counts.get(entry["session"], 0) + 1
    return by_id(manifest, max(counts, key=counts.get))


def defect_sessions(manifest: dict, kind: str) -> list[tuple[dict, dict]]:
    """(session, defect) pairs of one injected defect kind."""
    return [
        (by_id(manifest, d["session"]), d)
        for d in manifest["defects"]
        if d["kind"] == kind and d.get("row_id") is not None
    ]
