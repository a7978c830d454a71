"""Worker processes of `check --all` and of the index build, on real generated ledgers.

Both must give exactly what one process gives (same content, same order, bad ledgers reported
per session), in a forked worker (a process with one thread, as the CLI) and a spawned one
(a process with other threads, as a server), and Ctrl-C must end a run cleanly.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.cli import cli

from datasette_capsem import readonly
from datasette_capsem.catalog import Catalog
from datasette_capsem.checks import workers
from datasette_capsem.config import load_settings
from datasette_capsem.generate import GenerateOptions, generate_home
from datasette_capsem.index import IndexService, parallel

DEADLINE_SECONDS = 60  # bounds a hang only
TIMING = {"index_ms", "indexed_at", "checked_at", "check_ms"}


@contextmanager
def another_thread():
    """A second live thread, as a server has: the workers are spawned, not forked."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    try:
        assert workers._start_method() == "spawn"
        yield
    finally:
        stop.set()
        thread.join()


def check_all_json(home: Path, cache: Path, *options: str) -> dict:
    result = CliRunner().invoke(
        cli,
        [
            "capsem",
            "check",
            "--all",
            "--json",
            "--home",
            str(home),
            "--cache-dir",
            str(cache),
            *options,
        ],
    )
    assert result.exit_code == 2, result.output  # the home holds unreadable ledgers
    document = json.loads(result.stdout)
    for session in document["sessions"]:
        session.pop("duration_ms", None)
    return document


def test_check_all_in_processes_equals_one_process(capsem_home, manifest, tmp_path):
    one = check_all_json(capsem_home, tmp_path / "c1", "--workers", "1")
    with another_thread():
        spawned = check_all_json(capsem_home, tmp_path / "c2", "--workers", "2")
    assert spawned == one
    assert len(one["sessions"]) == len(manifest["sessions"])
    unreadable = {d["session"]["id"] for d in one["sessions"] if d["verdict"] == "unreadable"}
    broken = {
        b["session"]
        for b in manifest["broken_files"]
        if b["kind"] in ("zero_bytes", "not_sqlite", "truncated")
    }
    assert broken and broken <= unreadable


def dump(path: Path) -> dict[str, list]:
    """Every table of an index but FTS5's own, timing columns left out, rows sorted."""
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'text_search%'"
            )
        ]
        found = {}
        for table in tables:
            columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            kept = ", ".join(f'"{c}"' for c in columns if c not in TIMING)
            if table == "index_meta":
                kept = "key"
            found[table] = sorted(map(repr, conn.execute(f'SELECT {kept} FROM "{table}"')))
        found["search"] = conn.execute(
            "SELECT count(*) FROM text_search WHERE text_search MATCH 'a* OR e* OR t*'"
        ).fetchall()
        return found
    finally:
        conn.close()


def build(home: Path, cache: Path):
    settings = load_settings({"capsem_home": str(home), "cache_dir": str(cache)})
    service = IndexService(settings, Catalog(settings))
    return service, service.refresh()


@pytest.mark.heavy  # worker processes, tens of seconds: its module is scheduled first (conftest.py)
def test_index_build_in_processes_equals_one_process(capsem_home, tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 10**9)
    alone, alone_report = build(capsem_home, tmp_path / "one")
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 1)
    monkeypatch.setattr(parallel, "default_workers", lambda: 2)
    with another_thread():
        spawned, spawned_report = build(capsem_home, tmp_path / "spawned")
    forked, forked_report = build(capsem_home, tmp_path / "forked")
    assert alone_report.problems  # the home's broken ledgers, reported per session
    for report in (spawned_report, forked_report):
        assert report.indexed == alone_report.indexed
        assert report.problems == alone_report.problems
    expected = dump(alone.path)
    assert expected["ledgers"] and expected["text_rows"]
    assert dump(spawned.path) == expected
    assert dump(forked.path) == expected


def test_ctrl_c_ends_check_all_and_its_workers(tmp_path: Path):
    home = tmp_path / "home"
    generate_home(
        home, GenerateOptions(seed=3, sessions=150, hostile=False, broken=False, defects=False)
    )
    command = [
        sys.executable,
        "-m",
        "datasette",
        "capsem",
        "check",
        "--all",
        "--json",
        "--workers",
        "2",
        "--home",
        str(home),
        "--cache-dir",
        str(tmp_path / "c"),
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert process.stderr is not None
    try:
        assert "Checking sessions" in process.stderr.readline()
        process.send_signal(signal.SIGINT)
        stderr = process.stderr.read()
        process.wait(timeout=120)  # bounds a hang only
    finally:
        process.kill()
    assert process.returncode == 1, stderr  # the run alone would exit 0: no defect
    assert "Aborted!" in stderr and "Traceback" not in stderr


def test_a_dead_worker_is_an_error_not_a_hang():
    with pytest.raises(workers.WorkerFailed, match="ended unexpectedly"):
        list(workers.ordered_map(_die, [(1,), (2,), (3,)], 2, chunk=1))


def _die(number: int) -> int:
    if number == 2:
        signal.raise_signal(signal.SIGKILL)
    return number


def test_quick_checks_in_processes_equal_one_process(capsem_home, tmp_path, monkeypatch):
    settings = load_settings({"capsem_home": str(capsem_home), "cache_dir": str(tmp_path)})
    sessions = Catalog(settings).sessions()
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 10**9)
    alone = [replace(c, check_ms=0) for c in parallel.check_sessions(sessions, settings)]
    monkeypatch.setattr(parallel, "PROCESSES_FROM", 1)
    monkeypatch.setattr(parallel, "default_workers", lambda: 2)
    with another_thread():
        spawned = [replace(c, check_ms=0) for c in parallel.check_sessions(sessions, settings)]
    assert spawned == alone
    assert {c.verdict for c in alone} >= {"ok", "error", "unreadable"}


KILLED_PARENT = """
import sys, time
from datasette_capsem.checks import workers
print("started", flush=True)
for _ in workers.ordered_map(time.sleep, [(60,), (60,)], 2, chunk=1):
    pass
"""


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found |= {int(child) for child in (task / "children").read_text().split()}
    return found


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_workers_die_with_a_killed_parent(start):
    """A server stopped by SIGKILL leaves no worker behind holding its pipes (a stopped
    server's output never ending hung the README serving test)."""
    code = KILLED_PARENT
    if start == "spawn":  # a second thread makes ordered_map spawn, as in a server
        code = (
            "import threading; threading.Thread(target=lambda: __import__('time').sleep(99), daemon=True).start()\n"
            + code
        )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "started"
        deadline = time.monotonic() + DEADLINE_SECONDS
        workers_seen: set[int] = set()
        while len(workers_seen) < 2 and time.monotonic() < deadline:
            workers_seen = {
                child
                for child in _children(parent.pid)
                if "resource_tracker" not in Path(f"/proc/{child}/cmdline").read_text()
            }
            time.sleep(0.1)
        assert len(workers_seen) >= 2, workers_seen
        # Whether or not a worker's initializer ran yet: before, it sees its parent gone and
        # exits; after, the kernel kills it with its parent.
        parent.kill()
        parent.wait()
        while time.monotonic() < deadline and any(
            Path(f"/proc/{w}").exists() for w in workers_seen
        ):
            time.sleep(0.1)
        alive = [
            w
            for w in workers_seen
            if Path(f"/proc/{w}").exists() and "zombie" not in Path(f"/proc/{w}/status").read_text()
        ]
        assert not alive, f"workers outlived their parent: {alive}"
    finally:
        parent.kill()
        parent.wait()


def _logged(log: str, number: int, what: str = "run") -> int:
    with open(log, "a") as handle:
        handle.write(f"{what} {number}\n")
    return number


def _logged_ahead(log: str, number: int) -> None:
    _logged(log, number, "ahead")


def test_index_workers_ask_for_each_ledger_ahead_of_its_turn(tmp_path):
    """The index build's read and verdict passes ask the kernel for each ledger's file a few
    ledgers before its turn (`parallel.run_ahead`, `readonly.read_ahead`): read cold, page by
    page, a ledger waited ten times its CPU for the disk. Each item is asked for once, in its
    own worker, before it runs and at most AHEAD items before."""
    log = tmp_path / "log"
    items = [(str(log), number) for number in range(40)]
    chunks = [(_logged, items[start : start + 16], _logged_ahead) for start in (0, 16, 32)]
    got = [n for done in workers.ordered_map(parallel.run_ahead, chunks, 2, chunk=1) for n in done]
    assert got == list(range(40))
    lines = log.read_text().split("\n")[:-1]
    for number in range(40):
        ahead, run = lines.index(f"ahead {number}"), lines.index(f"run {number}")
        assert lines.count(f"ahead {number}") == 1 and ahead < run
    log.unlink()  # in this process: the exact order within a chunk
    assert parallel.run_ahead(_logged, items[:6], _logged_ahead) == list(range(6))
    words = log.read_text().split()
    assert list(zip(words[0::2], words[1::2], strict=True))[: parallel.AHEAD + 2] == [
        *[("ahead", str(n)) for n in range(parallel.AHEAD)],
        ("ahead", str(parallel.AHEAD)),
        ("run", "0"),
    ]


def test_read_ahead_changes_nothing_and_never_fails(capsem_home, tmp_path):
    ledgers = sorted(capsem_home.rglob("session.db"))[:5]
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in ledgers}
    for path in ledgers:
        readonly.read_ahead(path)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in ledgers} == before
    readonly.read_ahead(None)  # a vacuumed session: nothing to read
    readonly.read_ahead(tmp_path / "gone" / "session.db")
    assert not (tmp_path / "gone").exists()
