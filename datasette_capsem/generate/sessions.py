"""Write one session's ledger file and describe it for main.db and the manifest.

``write_session`` is a top-level function of picklable arguments so bulk homes can spread it
over processes; each session draws from its own seeded generator, so the order in which
sessions are written never changes their bytes.
"""

from __future__ import annotations

import functools
import gzip
import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasette_capsem.generate import (
    broken,
    defects,
    dirfiles,
    era_templates,
    hostile,
    migrated,
    writer_paths,
)
from datasette_capsem.generate.content import Builder, build_session
from datasette_capsem.generate.options import GenerateOptions
from datasette_capsem.generate.plan import SessionSpec, legacy_run_zeros
from datasette_capsem.generate.rows import Ledger, insert_rows
from datasette_capsem.generate.wal import append_uncheckpointed
from datasette_capsem.ledger import eras


@functools.cache
def current_tables() -> frozenset[str]:
    """Tables of the current era. Built on first use, not at import: building the template
    takes ~0.3 s, and every `datasette` command imports this module through the plugin."""
    return frozenset(era_templates.table_columns(eras.HEAD.name))


ROLLUP_ZERO = {
    "total_requests": 0,
    "allowed_requests": 0,
    "denied_requests": 0,
    "total_input_tokens": 0,
    "total_output_tokens": 0,
    "total_estimated_cost": 0.0,
    "total_tool_calls": 0,
    "total_file_events": 0,
    "exec_count": 0,
    "audit_event_count": 0,
    "total_mcp_calls": 0,
}


@dataclass
class SessionResult:
    """What main.db and the manifest need to know about a written session."""

    id: str
    counts: dict[str, int] = field(default_factory=dict)
    totals: dict[str, Any] = field(
        default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "cost": 0.0}
    )
    traces: list[str] = field(default_factory=list)
    rollup: dict[str, Any] = field(default_factory=lambda: dict(ROLLUP_ZERO))
    usage: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    defects: list[dict[str, Any]] = field(default_factory=list)
    hostile: list[dict[str, Any]] = field(default_factory=list)
    broken: list[dict[str, Any]] = field(default_factory=list)
    end: str | None = None
    compressed_size: int | None = None
    habits: dict[str, Any] = field(default_factory=dict)


def session_rng(seed: int, spec: SessionSpec) -> random.Random:
    return random.Random(f"{seed}:{spec.id}:{spec.ledger}")


def write_session(home: Path, spec: SessionSpec, options: GenerateOptions) -> SessionResult:
    """Build, taint, write and summarise one session with a file on disk."""
    rng = session_rng(options.seed, spec)
    path = home / spec.ledger
    result = SessionResult(spec.id)
    if spec.era == eras.MIGRATED.name:
        b, era_entries = migrated.build(rng, spec)
    else:
        parent = fork_rows(spec, options)
        b = build_session(
            rng, spec.era, spec.start, spec.shape, ledger=parent.ledger if parent else None
        )
        if parent:
            b.absorb(parent)
        era_entries = []
    if spec.broken:
        broken.write_broken(path, spec.broken, b)
        result.broken.append({"kind": spec.broken, "path": spec.ledger, "session": spec.id})
        return result
    entries = list(era_entries)
    for kind in spec.defects:
        if kind in defects.ROW_INJECTORS:
            entries += defects.ROW_INJECTORS[kind](b)
    if spec.shape.interrupted:
        entries += defects.tool_call_without_response(b)
    for writer_path in spec.writer_paths:
        b.results_in_another_trace += writer_paths.PATHS[writer_path](b)
    post: list[tuple[str, tuple]] = []
    if spec.hostile:
        result.hostile, post = hostile.inject(b, spec.id)
    if b.forced:
        post.append(("PRAGMA ignore_check_constraints=ON", ()))
        post += [
            (f"UPDATE {table} SET {column} = ? WHERE id = ?", (value, rid))
            for table, column, value, rid in b.forced
        ]
        post.append(("PRAGMA ignore_check_constraints=OFF", ()))
    if "schema_not_ready" in spec.defects:
        post += corrupt_index()
        entries.append(("schema_not_ready", None, None))
    if "unclean_wal" in spec.defects:
        entries.append(("unclean_wal", None, None))
    entries += [
        ("legacy_tables", table, None)
        for table in sorted(set(era_templates.table_columns(spec.era)) - current_tables())
    ]
    result.defects = [
        {"kind": k, "session": spec.id, "table": t, "row_id": r} for k, t, r in entries
    ]
    result.habits = habits(spec, b)
    write_file(path, spec.era, b.ledger, post, wal_tail=spec.live or "unclean_wal" in spec.defects)
    summarise(result, b)
    dirfiles.write_dir_files(path.parent, spec)
    if spec.kind == "legacy_gz":
        result.compressed_size = vacuum_and_gzip(path)
    elif spec.reader_wal:
        read_only_once(path)
    return result


def habits(spec: SessionSpec, b: Builder) -> dict[str, Any]:
    """What Capsem's writer did in this session that looks odd but is normal (manifest.py)."""
    found = b.habits()
    found["legacy_run_zeros"] = legacy_run_zeros(spec)
    found["reader_left_wal"] = spec.reader_wal
    return found


def read_only_once(path: Path) -> None:
    """What check_session.py, list_sessions.py or any sqlite3 mode=ro reader leaves beside a
    finished WAL-mode ledger: an empty -wal and a 32 KiB -shm (spec §4.7). Not a live writer."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        conn.close()


def fork_rows(spec: SessionSpec, options: GenerateOptions) -> Builder | None:
    """A fork starts as a VACUUM INTO copy of its parent's ledger (§1.3): the parent's rows,
    event ids included, come first."""
    parent = spec.fork_parent
    if parent is None:
        return None
    return build_session(session_rng(options.seed, parent), parent.era, parent.start, parent.shape)


def corrupt_index() -> list[tuple[str, tuple]]:
    """Point an index's definition at another column so integrity_check fails but reads work."""
    return [
        ("PRAGMA writable_schema=ON", ()),
        (
            "UPDATE sqlite_master SET sql = replace(sql, 'fs_events(path)', 'fs_events(action)') WHERE name = 'idx_fs_events_path'",
            (),
        ),
        ("PRAGMA writable_schema=OFF", ()),
    ]


def write_file(
    path: Path, era: str, ledger: Ledger, post: list[tuple[str, tuple]], *, wal_tail: bool
) -> None:
    """Template copy, bulk insert, post-insert SQL, then WAL mode (and, if asked, leave the last
    third of the rows committed in an un-checkpointed -wal)."""
    head, tail = broken.split(ledger) if wal_tail else (ledger, None)
    target = path.with_name("session.db")
    era_templates.create_db(target, era)
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        insert_rows(conn, era, head)
        conn.execute("COMMIT")
        for sql, params in post:
            conn.execute(sql, params)
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
    if tail is not None:
        append_uncheckpointed(target, era, tail)


def vacuum_and_gzip(path: Path) -> int:
    """Capsem 0.x vacuum: VACUUM, gzip to session.db.gz (mtime 0 for determinism), delete."""
    db = path.with_name("session.db")
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("VACUUM")
    finally:
        conn.close()
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        gz.write(db.read_bytes())
    db.unlink()
    return path.stat().st_size


def summarise(result: SessionResult, b: Builder) -> None:
    """Counts, totals, trace ids and the §3.5 rollup, computed from the rows written."""
    rows = b.ledger.rows
    result.counts = {table: len(r) for table, r in sorted(rows.items()) if r}
    calls = rows["model_calls"]
    inp = sum(c["input_tokens"] or 0 for c in calls)
    out = sum(c["output_tokens"] or 0 for c in calls)
    cost = 0.0
    for call in calls:
        cost += call["estimated_cost_usd"] or 0.0
    result.totals = {"input_tokens": inp, "output_tokens": out, "cost": cost}
    result.traces = list(dict.fromkeys(c["trace_id"] for c in calls if c["trace_id"]))
    net = rows["net_events"]
    result.rollup = {
        "total_requests": len(net),
        "allowed_requests": sum(1 for r in net if r["decision"] == "allowed"),
        "denied_requests": sum(1 for r in net if r["decision"] == "denied"),
        "total_input_tokens": inp,
        "total_output_tokens": out,
        "total_estimated_cost": cost,
        "total_tool_calls": len(rows["tool_calls"]),
        "total_file_events": len(rows["fs_events"]),
        "exec_count": len(rows["exec_events"]),
        "audit_event_count": len(rows["audit_events"]),
        "total_mcp_calls": len(rows["mcp_calls"])
        + sum(1 for r in rows["tool_calls"] if r.get("origin") == "mcp"),
    }
    result.usage = usage_rows(rows)
    stamps = [r["timestamp"] for r in net if isinstance(r.get("timestamp"), str)]
    result.end = max(stamps) if stamps else None


def usage_rows(rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """ai_usage / tool_usage / mcp_usage as the 0.x app filled them (unused at HEAD)."""
    ai: dict[str, dict[str, Any]] = {}
    for c in rows["model_calls"]:
        agg = ai.setdefault(
            c["provider"],
            {
                "provider": c["provider"],
                "call_count": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "estimated_cost": 0.0,
                "total_duration_ms": 0,
            },
        )
        agg["call_count"] += 1
        agg["input_tokens"] += c["input_tokens"] or 0
        agg["output_tokens"] += c["output_tokens"] or 0
        agg["estimated_cost"] += c["estimated_cost_usd"] or 0.0
        agg["total_duration_ms"] += c["duration_ms"] or 0
    tools: dict[str, dict[str, Any]] = {}
    for t in rows["tool_calls"]:
        name = t["tool_name"] if isinstance(t["tool_name"], str) else "?"
        agg = tools.setdefault(
            name, {"tool_name": name, "call_count": 0, "total_bytes": 0, "total_duration_ms": 0}
        )
        agg["call_count"] += 1
        agg["total_bytes"] += len(t["arguments"] or "")
    mcp: dict[str, dict[str, Any]] = {}
    for m in rows["mcp_calls"]:
        agg = mcp.setdefault(
            m["tool_name"],
            {
                "tool_name": m["tool_name"],
                "server_name": m["server_name"],
                "call_count": 0,
                "total_bytes": 0,
                "total_duration_ms": 0,
            },
        )
        agg["call_count"] += 1
        agg["total_bytes"] += m["bytes_sent"] + m["bytes_received"]
        agg["total_duration_ms"] += m["duration_ms"]
    return {
        "ai_usage": list(ai.values()),
        "tool_usage": list(tools.values()),
        "mcp_usage": list(mcp.values()),
    }
