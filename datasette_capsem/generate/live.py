"""Keep appending rows to one session.db from a separate process, as capsem-process does.

``run_live`` is the writer loop (used by ``datasette capsem generate DIR --live ID``);
``LiveWriter`` starts it in a child process for tests of reading while Capsem writes. The
writer commits in WAL mode with SQLite's default auto-checkpoint, so readers see a growing
-wal; on SIGTERM/SIGINT it checkpoints with TRUNCATE and exits as Capsem does at clean shutdown,
while ``kill()`` leaves the WAL behind like a crash.
"""

from __future__ import annotations

import argparse
import random
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from datasette_capsem.generate import vocabulary
from datasette_capsem.generate.content import Builder
from datasette_capsem.generate.manifest import load_manifest
from datasette_capsem.generate.rows import Ledger, insert_rows
from datasette_capsem.ledger import eras

READY = "capsem-live-writer ready"


class LiveError(Exception):
    """The session cannot be written live."""


def find_ledger(home: Path, session_id: str) -> Path:
    """The session.db of ``session_id``: from manifest.json if present, else by directory."""
    home = Path(home)
    candidates = []
    if (home / "manifest.json").exists():
        for entry in load_manifest(home)["sessions"]:
            if entry["id"] == session_id and entry["ledger"]:
                candidates.append(home / entry["ledger"])
    candidates += [
        home / "run" / "sessions" / session_id / "session.db",
        home / "run" / "persistent" / session_id / "session.db",
    ]
    for path in candidates:
        if path.name == "session.db" and path.is_file():
            return path
    raise LiveError(f"no session.db for session {session_id!r} under {home}")


def _next_ids(conn: sqlite3.Connection) -> dict[str, int]:
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return {t: (conn.execute(f"SELECT max(id) FROM {t}").fetchone()[0] or 0) + 1 for t in tables}


def _ambient(conn: sqlite3.Connection) -> str | None:
    """The session's CAPSEM_TRACE_ID (16 hex), which the rows it already has carry."""
    row = conn.execute(
        "SELECT trace_id FROM dns_events WHERE length(trace_id) = 16 ORDER BY id LIMIT 1"
    ).fetchone()
    return row[0] if row else None


def open_writer(path: Path) -> sqlite3.Connection:
    """Open like capsem-process: WAL, synchronous=NORMAL, 5 s busy timeout; current era only."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        columns = {r[1] for r in conn.execute("PRAGMA table_info(model_items)")}
    except sqlite3.DatabaseError as error:
        raise LiveError(f"{path}: {error}") from error
    if "turn_id" not in columns:
        conn.close()
        raise LiveError(f"{path} is not a current-era ledger; live mode writes only those")
    return conn


def run_live(
    home: Path,
    session_id: str,
    *,
    rate: float,
    duration: float | None = None,
    seed: int = 1,
    announce: bool = False,
) -> int:
    """Append agentic traces at about ``rate`` rows/s until ``duration`` or a signal; returns rows."""
    path = find_ledger(home, session_id)
    conn = open_writer(path)
    stop = {"now": False}

    def request_stop(_signum: int, _frame: object) -> None:
        stop["now"] = True

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    next_ids = _next_ids(conn)
    ambient = _ambient(conn)
    # model_items is UNIQUE(trace_id, kind, content_hash, call_id); the writer dedups on it.
    item_keys = set(conn.execute("SELECT trace_id, kind, content_hash, call_id FROM model_items"))
    # Seeded by where the file stands, so a second run never repeats the first one's event ids.
    rng = random.Random(f"{seed}:live:{session_id}:{sorted(next_ids.items())}")
    written = 0
    began = time.monotonic()
    if announce:
        print(READY, flush=True)
    try:
        while not stop["now"] and (duration is None or time.monotonic() - began < duration):
            ledger = Ledger(next_ids)
            builder = Builder(rng, eras.HEAD.name, datetime.now(timezone.utc), ledger, ambient)
            ambient = builder.ambient
            builder.item_keys = item_keys
            provider = rng.choice(vocabulary.PROVIDER_NAMES)
            builder.trace(
                provider,
                rng.choice(sorted(vocabulary.PROVIDERS[provider].models)),
                rng.randint(1, 3),
            )
            conn.execute("BEGIN IMMEDIATE")
            insert_rows(conn, eras.HEAD.name, ledger)
            conn.execute("COMMIT")
            next_ids = ledger.next_ids()
            written += ledger.count()
            _sleep_until(began + written / rate, stop, duration, began)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    return written


def _sleep_until(
    deadline: float, stop: dict[str, bool], duration: float | None, began: float
) -> None:
    """Sleep in short steps so a stop request or the end of ``duration`` is honoured quickly."""
    if duration is not None:
        deadline = min(deadline, began + duration)
    while not stop["now"]:
        # Read the clock once: a deadline checked, then subtracted from a later reading, can
        # pass in between on a busy machine, and a negative sleep raises ValueError.
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.05, left))


class LiveWriter:
    """A live writer in a child process. Use as a context manager, or start()/stop()."""

    def __init__(
        self,
        home: Path,
        session_id: str,
        *,
        rate: float = 50.0,
        duration: float | None = None,
        seed: int = 1,
    ) -> None:
        self.home = Path(home)
        self.session_id = session_id
        self.rate = rate
        self.duration = duration
        self.seed = seed
        self.path = find_ledger(self.home, session_id)
        self.process: subprocess.Popen[str] | None = None
        self.errors = ""  # the child's stderr, once stopped: why it failed, if it did

    def start(self, timeout: float = 30.0) -> LiveWriter:
        """Start the child and wait until it has the database open."""
        args = [
            sys.executable,
            "-m",
            "datasette_capsem.generate.live",
            str(self.home),
            self.session_id,
            "--rate",
            str(self.rate),
            "--seed",
            str(self.seed),
        ]
        if self.duration is not None:
            args += ["--duration", str(self.duration)]
        self.process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline() if self.process.stdout else ""
        if READY not in line or time.monotonic() > deadline:
            self.process.kill()
            raise LiveError(
                f"live writer did not start: {line}{self.process.stderr.read() if self.process.stderr else ''}"
            )
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """Clean shutdown (SIGTERM): final checkpoint, no -wal left. Returns the exit code."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        if self.process.stderr and not self.process.stderr.closed:  # not stopped before
            self.errors = self.process.stderr.read()
        self._close_pipes()
        return code

    def kill(self) -> None:
        """Crash (SIGKILL): committed rows stay in the -wal, un-checkpointed."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.process is not None:
            for pipe in (self.process.stdout, self.process.stderr):
                if pipe:
                    pipe.close()

    def __enter__(self) -> LiveWriter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Append rows to a Capsem session.db until stopped."
    )
    parser.add_argument("home", type=Path)
    parser.add_argument("session_id")
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        run_live(
            args.home,
            args.session_id,
            rate=args.rate,
            duration=args.duration,
            seed=args.seed,
            announce=True,
        )
    except LiveError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
