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
    plain, _ = build(capsem_home, tmp_path / "plain")
    assert not extract._rendered
    expected = dump(plain.path)
    assert expected["text_rows"] and expected["session_checks"]
    assert dump(fast.path) == expected
    stored = _reports(tmp_path / "plain")
    assert stored and _reports(tmp_path / "fast") == stored
