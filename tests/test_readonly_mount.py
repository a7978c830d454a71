"""A team instance may see the Capsem home on a read-only mount (spec §4.7): a finished WAL
ledger, a live one with its -wal and -shm, and a -wal without -shm must all be readable."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import session_in

ROOT = Path(__file__).resolve().parent.parent


def unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


def expected_model_calls(ledger: Path, tmp_path: Path) -> int:
    """Count with SQLite on a private copy of the ledger and its WAL (never the original)."""
    copy = tmp_path / "count" / "session.db"
    copy.parent.mkdir(exist_ok=True)
    for suffix in ("", "-wal"):
        if Path(f"{ledger}{suffix}").exists():
            shutil.copy(f"{ledger}{suffix}", f"{copy}{suffix}")
    conn = sqlite3.connect(copy)
    try:
        return conn.execute("select count(*) from model_calls").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.skipif(not unshare_works(), reason="needs `unshare -rm` for a private read-only mount")
def test_every_ledger_kind_reads_on_a_read_only_mount(manifest, tmp_path, private_home):
    home = private_home
    finished = session_in(manifest, era="head", kind="ephemeral", has=("clean",), lacks=("live",))
    live = session_in(manifest, has=("live", "ledger"))
    no_shm = next(b for b in manifest["broken_files"] if b["kind"] == "wal_without_shm")
    wanted = {
        finished["id"]: finished["ledger"],
        live["id"]: live["ledger"],
        no_shm["session"]: no_shm["path"],
    }
    mount_point = tmp_path / "ro"
    mount_point.mkdir()
    result = subprocess.run(
        [
            "unshare",
            "-rm",
            sys.executable,
            "-m",
            "tests.readonly_mount_probe",
            str(home),
            str(mount_point),
            str(tmp_path / "cache"),
            *wanted,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers["/"] == 200
    for session_id, ledger in wanted.items():
        assert answers[session_id] == expected_model_calls(home / ledger, tmp_path), session_id
