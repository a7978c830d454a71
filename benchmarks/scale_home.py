"""A home of many sessions made quickly: copies of generated ledgers under new ids, plus
vacuumed sessions that exist only as main.db rows (issue 29).

`scale_home(100_000)` writes `benchmarks/out/scale-100000/` once and reuses it:
- 30 % of the sessions have a ledger: a copy (a real copy, its own inode) of one of the ~900
  clean ledgers of a generated 3,000-session home, in `run/sessions/<new uuid>/session.db`;
- the rest are `vacuumed` main.db rows with plausible rollups and no directory, but 1 in 16
  is left `running` long after its start (the stale_running finding, so the findings page
  has thousands of sessions to show at 100,000);
- main.db rows are spread over 300 days; a ledger's row carries its donor's rollup, so the
  list's rollup comparison agrees with what the index reads.

A donor is copied many times, so its trace and event ids occur in many sessions; the first
PROBES donors are copied exactly once into each home, so an id search for one of their ids
answers one session at every size (`probe_event_ids`).

Usage: python benchmarks/scale_home.py 100000    (prints the home's path)
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from common import OUT, generated_home

from datasette_capsem.generate import era_templates

DONOR_SESSIONS = 3000
PROBES = 40
LEDGER_SHARE = 0.3
DAYS = 300
STALE_PREFIX = "a"  # 1 in 16 vacuumed rows is left 'running' (stale_running, an error)
END = datetime(2026, 11, 30, tzinfo=timezone.utc)


def donor_home() -> Path:
    return generated_home(
        DONOR_SESSIONS,
        seed=29,
        traces_per_session=1,
        defects=False,
        hostile=False,
        broken=False,
    )


def donors(home: Path) -> list[dict]:
    """Clean, finished, HEAD-era ledgers of the donor home, with their main.db rows."""
    found = [
        s
        for s in json.loads((home / "manifest.json").read_text())["sessions"]
        if s.get("ledger")
        and s["ledger"].endswith("session.db")
        and s.get("clean")
        and not s.get("live")
        and not s.get("alias_of")
        and not s.get("forked_from")
        and s.get("era") == "head"
        and s["kind"] in ("ephemeral", "persistent", "run")
        and s.get("counts", {}).get("model_calls")
        and (home / s["ledger"]).stat().st_size < 1_000_000
    ]
    conn = sqlite3.connect(f"file:{home / 'sessions' / 'main.db'}?immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    rows = {row["id"]: dict(row) for row in conn.execute("SELECT * FROM sessions")}
    conn.close()
    return [dict(s, row=rows[s["id"]]) for s in found if s["id"] in rows]


def scale_home(sessions: int, seed: int = 29) -> Path:
    home = OUT / f"scale-{sessions}"
    if (home / "scale.json").exists():
        return home
    started = time.perf_counter()
    print(f"making a {sessions:,}-session home in {home} ...", file=sys.stderr)
    shutil.rmtree(home, ignore_errors=True)
    source = donor_home()
    pool = donors(source)
    rng = random.Random(f"{seed}:{sessions}")
    probes, rest = pool[:PROBES], pool[PROBES:]
    ledgers = int(sessions * LEDGER_SHARE)
    (home / "run" / "sessions").mkdir(parents=True)
    (home / "sessions").mkdir()
    main = home / "sessions" / "main.db"
    era_templates.create_db(main, era_templates.MAIN_V7)
    conn = sqlite3.connect(main)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(sessions)")]
    insert = (
        f"INSERT INTO sessions ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    )
    probe_ids: list[dict] = []
    batch = []
    for index in range(sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        start = END - timedelta(seconds=rng.uniform(0, DAYS * 86400))
        stop = start + timedelta(minutes=rng.randint(3, 300))
        if index < ledgers:
            donor = probes[index] if index < len(probes) else rest[index % len(rest)]
            target = home / "run" / "sessions" / sid
            target.mkdir()
            shutil.copyfile(source / donor["ledger"], target / "session.db")
            row = dict(donor["row"], status="stopped", mode="ephemeral", persistent=0)
            if index < len(probes):
                probe_ids.append({"session": sid, "donor": donor["id"]})
        else:
            row = vacuumed_row(rng)
            if sid.startswith(STALE_PREFIX):  # a main.db row left 'running': a finding
                row["status"] = "running"
        row.update(
            id=sid,
            created_at=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            stopped_at=stop.strftime("%Y-%m-%dT%H:%M:%SZ"),
            forked_from=None,
        )
        if row["status"] == "running":
            row["stopped_at"] = None
        if row["status"] == "vacuumed":
            row["vacuumed_at"] = (stop + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        batch.append(tuple(row.get(c) for c in columns))
        if len(batch) >= 5000:
            conn.executemany(insert, batch)
            batch.clear()
    conn.executemany(insert, batch)
    conn.commit()
    conn.close()
    (home / "scale.json").write_text(
        json.dumps({"sessions": sessions, "ledgers": ledgers, "probes": probe_ids}, indent=1)
    )
    print(f"  done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return home


def vacuumed_row(rng: random.Random) -> dict:
    requests = rng.randint(0, 80)
    denied = rng.randint(0, requests // 10)
    inp, out = rng.randint(2_000, 400_000), rng.randint(200, 40_000)
    return {
        "mode": "ephemeral",
        "command": None,
        "status": "vacuumed",
        "scratch_disk_size_gb": 16,
        "ram_bytes": 4096 * 1024 * 1024,
        "total_requests": requests,
        "allowed_requests": requests - denied,
        "denied_requests": denied,
        "total_input_tokens": inp,
        "total_output_tokens": out,
        "total_estimated_cost": round((inp * 3.0 + out * 15.0) / 1e6, 6),
        "total_tool_calls": rng.randint(0, 60),
        "total_file_events": rng.randint(0, 40),
        "compressed_size_bytes": rng.randint(100_000, 900_000),
        "storage_mode": "virtiofs",
        "persistent": 0,
        "exec_count": rng.randint(0, 10),
        "audit_event_count": rng.randint(0, 50),
    }


def probe_event_ids(home: Path, count: int) -> list[tuple[str, str]]:
    """(session id, event id) pairs whose event id occurs in that one session only."""
    found = []
    for probe in json.loads((home / "scale.json").read_text())["probes"]:
        path = home / "run" / "sessions" / probe["session"] / "session.db"
        conn = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        row = conn.execute(
            "SELECT event_id FROM net_events WHERE event_id IS NOT NULL LIMIT 1"
        ).fetchone()
        conn.close()
        if row:
            found.append((probe["session"], row[0]))
        if len(found) >= count:
            break
    return found


def probe_sessions(home: Path) -> list[str]:
    return [p["session"] for p in json.loads((home / "scale.json").read_text())["probes"]]


if __name__ == "__main__":
    print(scale_home(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
