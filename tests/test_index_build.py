"""The index build's fast paths give exactly what the plain ones give (issue 17).

TEXT is decoded by sqlite3's C decoder and read again with `readonly.decode_text` only when a
value is not valid UTF-8 (`readonly.tolerant`); extraction SQL is rendered once per table
shape; the checks' rule book is taken once per refresh. On the generated home (hostile bytes
included), every index table and every stored report must be what the plain paths write.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path

import pytest

from datasette_capsem import readonly
from datasette_capsem.checks import engine, fused
from datasette_capsem.index import extract, parallel
from tests.test_workers import build, dump


def _reports(cache: Path) -> dict[str, list]:
    """Every stored report of a cache, decoded, its timing left out."""
    found = {}
    for path in sorted(cache.rglob("*.json.z")):
        head, _, body = path.read_bytes().partition(b"\n")
        header = json.loads(head)
        report = json.loads(zlib.decompress(body))
        report.pop("duration_ms", None)
        found[str(path.relative_to(cache))] = [header["ledger"], header["validator"], report]
    return found


def _hostile_ledger(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany(
        "INSERT INTO t (body) VALUES (CAST(? AS TEXT))",
        [(b"plain",), (b"caf\xe9 \xff\xfe <b>",), ("h\u00e9llo".encode(),)],
    )
    conn.commit()
    conn.close()
    return path


def test_tolerant_reads_what_decode_text_reads(tmp_path):
    conn = readonly.open_readonly(_hostile_ledger(tmp_path / "session.db"), tmp_path / "cache")
    try:
        plain = conn.execute("SELECT body FROM t ORDER BY id").fetchall()
        seen = []

        def read():
            seen.append(conn.text_factory)
            return conn.execute("SELECT body FROM t ORDER BY id").fetchall()

        assert readonly.tolerant(conn, read) == plain
        assert plain[1][0] == "caf\ufffd \ufffd\ufffd <b>" and plain[2][0] == "h\u00e9llo"
        assert seen == [str, readonly.decode_text]  # C decoder first, then the replacing one
        assert conn.text_factory is readonly.decode_text
        valid = readonly.tolerant(
            conn, lambda: conn.execute("SELECT body FROM t WHERE id = 3").fetchall()
        )
        assert valid == [("h\u00e9llo",)]
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            readonly.tolerant(conn, lambda: conn.execute("SELECT * FROM absent").fetchall())
        assert conn.text_factory is readonly.decode_text
    finally:
        conn.close()


def _counted_one_by_one(conn, schema):
    present = [table for table in engine.COUNTED_TABLES if table in schema.tables]
    return engine._table_counts_one_by_one(conn, present)


def test_fast_paths_build_the_same_index_and_reports(capsem_home, tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 10**9)  # one process: the spies see all
    undecodable = []
    real = readonly._undecodable

    def spied(error):
        undecodable.append(real(error))
        return undecodable[-1]

    monkeypatch.setattr(readonly, "_undecodable", spied)
    fast, _ = build(capsem_home, tmp_path / "fast")
    assert any(undecodable)  # the home's hostile bytes took the second read

    # The plain paths: decode_text for every value, SQL rendered for every query.
    monkeypatch.setattr(readonly, "tolerant", lambda conn, read: read())
    monkeypatch.setattr(extract, "_rendered", {})  # the text queries' too
    original_init = extract.Columns.__init__

    def unmemoized(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self.key = None

    monkeypatch.setattr(extract.Columns, "__init__", unmemoized)
    # A statement per identifier kind, per check and per counted table (issue 29's shared
    # reads off): the same index and reports.
    monkeypatch.setattr(extract, "_scanned_ids", lambda *args: None)
    monkeypatch.setattr(fused, "AT_LEAST", 10**9)
    monkeypatch.setattr(engine, "table_counts", _counted_one_by_one)
    plain, _ = build(capsem_home, tmp_path / "plain")
    assert not extract._rendered
    expected = dump(plain.path)
    assert expected["text_rows"] and expected["session_checks"]
    assert dump(fast.path) == expected
    stored = _reports(tmp_path / "plain")
    assert stored and _reports(tmp_path / "fast") == stored


def _ids_ledger(path: Path) -> Path:
    """Identifier values of every awkward kind: placeholders, empty strings, integers, blobs,
    all-digit call ids, duplicates at higher row ids, turn_id equal to trace_id or not, a
    trace_id stored as an integer, a collated table and one whose row ids are not integers."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE net_events (id INTEGER PRIMARY KEY, event_id TEXT, trace_id TEXT,
            turn_id TEXT, call_id TEXT, message_id TEXT);
        CREATE TABLE tool_calls (id INTEGER PRIMARY KEY, trace_id TEXT, turn_id TEXT,
            call_id TEXT);
        CREATE TABLE fs_events (id INTEGER PRIMARY KEY, trace_id TEXT COLLATE NOCASE,
            event_id TEXT);
        CREATE TABLE odd_rows (id TEXT, trace_id TEXT);
        CREATE TABLE no_ids (id INTEGER PRIMARY KEY, body TEXT);
        """
    )
    rows = [
        ("aaaaaaaaaaaa", "tr-b", "tr-b", "toolu_1", "m1"),
        ("000000000000", "tr-a", "turn-x", "12", ""),
        ("", "tr-b", "turn-x", "toolu_1", None),
        (None, "", "", "", "m1"),
        (12, 7, 7, 42, b"blob"),
        ("bbbbbbbbbbbb", "tr-\u00e9", None, "call_\u00e9", "m2"),
        ("aaaaaaaaaaaa", "Tr-a", "tr-a", "007x", "m3"),
    ]
    conn.executemany(
        "INSERT INTO net_events (event_id, trace_id, turn_id, call_id, message_id) "
        "VALUES (?, ?, ?, ?, ?)",
        rows,
    )
    conn.executemany(
        "INSERT INTO tool_calls (trace_id, turn_id, call_id) VALUES (?, ?, ?)",
        [("t1", "t1", "c"), (5, "5", "c"), ("t2", "t9", "1")],
    )
    conn.executemany(
        "INSERT INTO fs_events (trace_id, event_id) VALUES (?, ?)",
        [("ABC", "e1"), ("abc", "e2"), ("Abc", None)],
    )
    conn.executemany(
        "INSERT INTO odd_rows (id, trace_id) VALUES (?, ?)", [("r1", "x"), (2, "x"), (None, "y")]
    )
    conn.commit()
    conn.close()
    return path


TABLE_ENDS = ('FROM "net_events"', 'FROM "odd_rows"', 'FROM "tool_calls"', 'FROM "fs_events"')


def test_ids_read_in_one_pass_equal_the_sql_of_each_kind(tmp_path, monkeypatch):
    """`extract.read_ids` reads a table's identifiers in one statement and sorts them out in
    Python; every value, kind, table and row must be what the SQL of each kind gives, in the
    same order, and the tables Python cannot judge exactly (a collation, non-integer row ids,
    an integer trace_id beside a turn_id) fall back to that SQL."""
    from datasette_capsem.ledger.schema import read_schema

    path = _ids_ledger(tmp_path / "session.db")
    conn = sqlite3.connect(path)
    try:
        schema = read_schema(conn)
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        scanned = extract.read_ids(conn, schema)
        scans = [
            s.strip() for s in statements if s.strip().endswith(TABLE_ENDS) and "SELECT id, " in s
        ]
        monkeypatch.setattr(extract, "_scanned_ids", lambda *args: None)
        statements.clear()
        expected = extract.read_ids(conn, schema)
        assert len(statements) > 9  # the SQL of each kind: a statement per table and kind
    finally:
        conn.close()
    assert scanned == expected
    kinds = {(kind, table) for _, kind, table, _ in expected}
    assert {
        ("event_id", "net_events"),
        ("turn_id", "tool_calls"),
        ("trace_id", "fs_events"),
    } <= kinds
    assert ("call_id", "tool_calls") in kinds and ("message_id", "net_events") in kinds
    # net_events in one pass; tool_calls (an integer trace_id) and odd_rows (text row ids)
    # scanned, then read with the SQL of each kind; fs_events (NOCASE) with that SQL alone.
    assert sorted(s.split(" FROM ")[-1] for s in scans) == [
        '"net_events"',
        '"odd_rows"',
        '"tool_calls"',
    ]
