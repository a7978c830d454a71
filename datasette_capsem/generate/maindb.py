"""sessions/main.db: one row per session Capsem recorded, rolled up as the service does (§3)."""

from __future__ import annotations

import random
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from datasette_capsem.generate import era_templates, migrated
from datasette_capsem.generate.content import blake3_ref, hex_id
from datasette_capsem.generate.hostile import PAYLOADS
from datasette_capsem.generate.options import GenerateOptions
from datasette_capsem.generate.plan import LEGACY_RUN_ZEROED, SessionSpec, legacy_run_zeros
from datasette_capsem.generate.sessions import ROLLUP_ZERO, SessionResult
from datasette_capsem.ledger import eras

ROOTFS_HASH = blake3_ref("capsem rootfs 1.6.2")


def iso_seconds(when) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def session_row(
    spec: SessionSpec, result: SessionResult | None, options: GenerateOptions
) -> dict[str, Any]:
    """The main.db row for ``spec``: HEAD rollup at stop, zeros while running (§3.5)."""
    rng = random.Random(f"{options.seed}:main:{spec.id}")
    legacy = spec.kind == "legacy" or spec.kind == "legacy_gz"
    current = spec.era in (eras.HEAD.name, None) and not legacy
    # A VM older than its main.db row (created by 1.2, reopened at HEAD) got its row when the
    # HEAD service started it: no persistent or ephemeral rows exist before 06-26 (§3.5).
    start = migrated.head_start(spec) if spec.era == eras.MIGRATED.name else spec.start
    stopped = start + timedelta(minutes=rng.randint(3, 300))
    row: dict[str, Any] = {
        "id": spec.id,
        "mode": spec.mode,
        "command": spec.command,
        "status": spec.status,
        "created_at": iso_seconds(start),
        "stopped_at": None if spec.status == "running" else iso_seconds(stopped),
        "scratch_disk_size_gb": 16,
        "ram_bytes": 4096 * 1024 * 1024,
        "storage_mode": "virtiofs" if current else "block",
        "rootfs_hash": ROOTFS_HASH if current else None,
        "rootfs_version": "1.6.2" if current else None,
        "forked_from": spec.forked_from,
        "persistent": 1 if spec.mode == "persistent" else 0,
        **ROLLUP_ZERO,
    }
    if spec.status == "running":
        return row
    if result is not None:
        row.update(result.rollup)
    elif spec.bulk_totals:
        row.update(random_rollup(rng, legacy or spec.mode == "run"))
    if legacy_run_zeros(spec) and result is not None:
        row.update(dict.fromkeys(LEGACY_RUN_ZEROED, 0))
        row["total_estimated_cost"] = 0.0
    elif not legacy:
        row["total_mcp_calls"] = 0  # HEAD never writes it; only 0.x rows carry a value
    if spec.status == "vacuumed" and result is not None:
        row["compressed_size_bytes"] = result.compressed_size
        row["vacuumed_at"] = iso_seconds(stopped + timedelta(days=1))
    return row


def random_rollup(rng: random.Random, tokens_zero: bool) -> dict[str, Any]:
    """Counters of a session whose ledger is gone. 1.0-era run rows wrote 0 tokens (§3.5)."""
    requests = rng.randint(0, 80)
    denied = rng.randint(0, requests // 10)
    inp = 0 if tokens_zero else rng.randint(2_000, 400_000)
    out = 0 if tokens_zero else rng.randint(200, 40_000)
    return {
        "total_requests": requests,
        "allowed_requests": requests - denied,
        "denied_requests": denied,
        "total_input_tokens": inp,
        "total_output_tokens": out,
        "total_estimated_cost": round((inp * 3.0 + out * 15.0) / 1e6, 6),
        "total_tool_calls": 0 if tokens_zero else rng.randint(0, 60),
        "total_file_events": rng.randint(0, 40),
        "exec_count": rng.randint(0, 10),
        "audit_event_count": rng.randint(0, 50),
    }


def write_main_db(
    home: Path,
    specs: list[SessionSpec],
    results: dict[str, SessionResult],
    options: GenerateOptions,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Write main.db; returns the defect entries and the hostile entries that live in it."""
    path = home / "sessions" / "main.db"
    era = era_templates.MAIN_OLD if options.old_main_db else era_templates.MAIN_V7
    era_templates.create_db(path, era)
    columns = set(era_templates.table_columns(era)["sessions"])
    entries: list[dict[str, Any]] = []
    tainted: list[dict[str, Any]] = []
    rows = []
    for spec in specs:
        if spec.status is None:
            continue
        result = results.get(spec.alias_of or spec.id)
        row = session_row(spec, result, options)
        if "rollup_mismatch" in spec.defects:
            row["total_input_tokens"] += 1234
            row["total_tool_calls"] += 1
            entries.append(
                {"kind": "rollup_mismatch", "session": spec.id, "table": "sessions", "row_id": None}
            )
        if "stale_running" in spec.defects:
            entries.append(
                {"kind": "stale_running", "session": spec.id, "table": "sessions", "row_id": None}
            )
        if options.hostile and spec.status == "terminated" and spec.command:
            row["command"] = f"{spec.command} {PAYLOADS[0]}"
            tainted.append(
                {
                    "kind": "html_payload",
                    "session": spec.id,
                    "table": "sessions",
                    "column": "command",
                    "row_id": None,
                }
            )
        rows.append({k: v for k, v in row.items() if k in columns})
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("BEGIN")
        cols = list(rows[0])
        conn.executemany(
            f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [[r[c] for c in cols] for r in rows],
        )
        insert_usage(conn, specs, results)
        insert_profile_mutations(conn, options.seed)
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
    return entries, tainted


def insert_usage(
    conn: sqlite3.Connection, specs: list[SessionSpec], results: dict[str, SessionResult]
) -> None:
    """Only the 0.x app filled the usage tables; HEAD leaves them empty (§3.5)."""
    for spec in specs:
        result = results.get(spec.id)
        if spec.kind not in ("legacy", "legacy_gz") or result is None or spec.status is None:
            continue
        for table, rows in result.usage.items():
            for row in rows:
                cols = ["session_id", *row]
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [spec.id, *row.values()],
                )


def insert_profile_mutations(conn: sqlite3.Connection, seed: int) -> None:
    """Profile edits are logged in main.db at HEAD (§3.1)."""
    rng = random.Random(f"{seed}:profile")
    base_ms = 1_785_600_000_000
    edits = (
        ("code", "network", "allowlist.toml", "domains.pypi", "add", "applied", None),
        ("co-work", "mcp", "servers.toml", "servers.github", "update", "applied", None),
        (
            "code",
            "network",
            "allowlist.toml",
            "domains.evil",
            "add",
            "failed",
            "rule rejected by validator",
        ),
    )
    for number, (profile, category, filename, key, op, status, error) in enumerate(edits):
        old = rng.randint(200, 4000)
        conn.execute(
            "INSERT INTO profile_mutation_events (timestamp_unix_ms, mutation_id, profile_id, actor, category, filename, affected_path, target_kind, target_key, operation, rule_id, old_hash, old_size, new_hash, new_size, status, error, trace_id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                base_ms + number * 60_000,
                hex_id(rng),
                profile,
                "user",
                category,
                filename,
                f"profiles/{profile}/{filename}",
                "rule",
                key,
                op,
                f"{category}.{key}",
                blake3_ref(f"{number}-old"),
                old,
                blake3_ref(f"{number}-new") if status == "applied" else blake3_ref(f"{number}-old"),
                old + 40 if status == "applied" else old,
                status,
                error,
                None,
            ),
        )
