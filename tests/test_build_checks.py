"""The index build quick-checks each ledger it reads on the connection that reads it (issue 29).

Opening the file once for both jobs must change nothing: the stored verdicts, findings and
quick reports are those of a build whose checks open every ledger themselves, on the generated
home with its broken ledgers, forks, aliases, hostile text and vacuumed sessions, in one
process and in worker processes.
"""

from __future__ import annotations

import contextlib
import threading

from datasette_capsem import readonly
from datasette_capsem.checks import runner
from datasette_capsem.index import parallel, reader
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
