"""The index build quick-checks each ledger it reads on the connection that reads it (issue 29).

Opening the file once for both jobs must change nothing: the stored verdicts, findings and
quick reports are those of a build whose checks open every ledger themselves, on the generated
home with its broken ledgers, forks, aliases, hostile text and vacuumed sessions, in one
process and in worker processes.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog
from datasette_capsem.checks import cache, runner
from datasette_capsem.config import load_settings
from datasette_capsem.index import parallel, reader
from datasette_capsem.ledger import tables
from tests.test_index_build import _reports
from tests.test_workers import build, dump


def _counting_opens(monkeypatch) -> list:
    """The paths the checks open themselves (`check_catalog_session`'s own connection), in this
    thread only: the build runs in it (one process), while an instance another test of this
    worker left serving may be refreshing its own index in a thread of its own."""
    opened = []
    real = readonly.open_readonly
    test_thread = threading.get_ident()

    def counted(path, cache_dir):
        if threading.get_ident() == test_thread:
            opened.append(path)
        return real(path, cache_dir)

    monkeypatch.setattr(runner.readonly, "open_readonly", counted)
    return opened


def test_checks_on_the_read_connection_equal_checks_opening_the_file(
    capsem_home, tmp_path, monkeypatch
):
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 10**9)  # one process: the spy sees all
    opened = _counting_opens(monkeypatch)
    shared, shared_report = build(capsem_home, tmp_path / "shared")
    shared_opens = len(opened)

    # Nothing lent: every check opens its ledger itself, as before the build shared them.
    monkeypatch.setattr(reader, "lending", lambda *args: contextlib.nullcontext())
    opened.clear()
    alone, alone_report = build(capsem_home, tmp_path / "alone")
    # Every indexed ledger that opened was checked on the connection that read it.
    read = [sid for sid in shared_report.indexed if sid not in shared_report.problems]
    assert read and shared_opens <= len(opened) - len(read)

    assert sorted(shared_report.checked) == sorted(alone_report.checked)
    assert shared_report.problems == alone_report.problems
    expected = dump(alone.path)
    assert expected["session_checks"] and expected["session_findings"]
    assert dump(shared.path) == expected
    stored = _reports(tmp_path / "alone")
    assert stored and _reports(tmp_path / "shared") == stored


def test_checks_in_worker_processes_equal_checks_opening_the_file(
    capsem_home, tmp_path, monkeypatch
):
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 1)
    monkeypatch.setattr(parallel, "default_workers", lambda: 2)
    shared, _ = build(capsem_home, tmp_path / "shared")
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 10**9)
    monkeypatch.setattr(reader, "lending", lambda *args: contextlib.nullcontext())
    alone, _ = build(capsem_home, tmp_path / "alone")
    assert dump(shared.path) == dump(alone.path)
    assert _reports(tmp_path / "shared") == _reports(tmp_path / "alone")


RECORD_TABLE_READS = r"""
import importlib.util, json, sys
from pathlib import Path
# ledger/tables.py loaded first, its LedgerTable recording each field read from the rule
# book's own code (checks/, queries/, ledger/ but tables.py), before anything imports it.
package = Path(sys.argv[1])
spec = importlib.util.spec_from_file_location(
    "datasette_capsem.ledger.tables", package / "ledger" / "tables.py"
)
tables = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = tables
spec.loader.exec_module(tables)
read = set()
real = tables.LedgerTable.__getattribute__
ours = tuple(str(package / part) for part in ("checks", "queries", "ledger"))
def recorded(self, name):
    caller = sys._getframe(1).f_code.co_filename
    if caller.startswith(ours) and not caller.endswith("tables.py"):
        read.add(name)
    return real(self, name)
tables.LedgerTable.__getattribute__ = recorded
from datasette_capsem import readonly
from datasette_capsem.checks.engine import check_session
for path in sys.argv[3:]:
    conn = readonly.open_readonly(Path(path), Path(sys.argv[2]))
    check_session(conn, main_row={"id": "x", "status": "stopped"})
    conn.close()
print(json.dumps(sorted(read)))
"""


def test_the_rule_book_digest_covers_what_the_checks_read_of_the_tables_registry(
    capsem_home, tmp_path, monkeypatch
):
    """An edit of `ledger/tables.py` that the checks do not read (a label, a lane) leaves the
    stored reports valid: the digest holds the fields the rule book reads of each table
    instead of the file. Those fields are recorded here, in a fresh interpreter importing the
    rule book and running every check (the full profile) on a few ledgers."""
    ledgers = sorted(str(p) for p in capsem_home.rglob("session.db"))[:5]
    done = subprocess.run(
        [sys.executable, "-c", RECORD_TABLE_READS, str(Path(cache.__file__).parents[1])]
        + [str(tmp_path), *ledgers],
        capture_output=True,
        text=True,
        check=True,
    )
    read = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "required_columns" in read and "rollup" in read  # the file checks' own
    assert read <= set(cache.RULE_BOOK_TABLE_FIELDS)
    assert "ledger/tables.py" not in cache.RULE_BOOK_PARTS and "ledger" not in cache.RULE_BOOK_PARTS

    facts = cache._table_facts()
    relabelled = tuple(replace(t, lane=t.lane + "-x") for t in tables.TABLES)
    monkeypatch.setattr(tables, "TABLES", relabelled)
    assert cache._table_facts() == facts
    first = tables.TABLES[0]
    required = (replace(first, required_columns=(*first.required_columns, "x")), *relabelled[1:])
    monkeypatch.setattr(tables, "TABLES", required)
    assert cache._table_facts() != facts


def test_a_changed_row_over_an_unchanged_ledger_runs_only_the_checks_that_read_it(
    capsem_home, tmp_path, monkeypatch
):
    """The verdict pass after the sessions' main.db rows changed (their ledgers did not) runs the
    checks that read the row (here the rollup's, whose verdict the change flips) and takes
    the ~30 that judge the file alone, quick_check included, from the stored report of that
    file version: none of their statements reach the ledger. The index and the stored
    reports are then those of a build of the changed home from scratch."""
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 10**9)  # one process: the trace sees all
    home = tmp_path / "home"
    shutil.copytree(capsem_home, home)
    service, _ = build(home, tmp_path / "cache")
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(tmp_path / "x")})
    chosen = next(
        s
        for s in Catalog(settings).sessions()
        if s.ledger_path is not None
        and s.ledger_path.suffix == ".db"
        and not s.live
        and s.main_row is not None
        and s.main_row["status"] == "stopped"
        and not Path(f"{s.ledger_path}-wal").exists()
        and "rollup_mismatch" not in service.snapshot().checks[s.id].get("kinds", "")
    )
    main_db = next(p for p in settings.main_db_candidates if p.exists())
    with sqlite3.connect(main_db) as conn:
        # Every row changes (the hostile and broken ledgers' sessions too): each is checked
        # again in the verdict pass; the statements are watched on the chosen one.
        conn.execute("UPDATE sessions SET total_file_events = total_file_events + 7")
    conn.close()

    sent: list[str] = []
    connect = readonly.connect

    def traced(state, cache_dir):
        conn = connect(state, cache_dir)
        if Path(state.path) == chosen.ledger_path:
            conn.set_trace_callback(sent.append)
        return conn

    monkeypatch.setattr(readonly, "connect", traced)
    service.refresh()
    monkeypatch.setattr(readonly, "connect", connect)
    assert any("main.db rollup figure" in s for s in sent)  # the rollup check read the ledger
    assert not any("quick_check" in s or "quick consistency" in s for s in sent)
    assert not any("checks/fused.py" in s or "julianday" in s for s in sent)
    assert not any("SELECT COUNT(*) FROM" in s and "rollup" not in s for s in sent)
    assert "rollup_mismatch" in service.snapshot().checks[chosen.id]["kinds"]

    fresh, _ = build(home, tmp_path / "fresh")
    assert dump(service.path) == dump(fresh.path)
    assert _reports(tmp_path / "cache") == _reports(tmp_path / "fresh")
