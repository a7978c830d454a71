"""The other files Capsem leaves in a session dir (spec §1.3, §1.6), so discovery is tested
against real-looking dirs rather than a lone session.db.

HEAD dirs: process.log (JSONL tracing), serial.log, pty.log, the MCP aggregator's stderr log and
lock, guest/ (the VirtioFS share: system/rootfs.img, workspace/), the system and workspace
compatibility symlinks, the auto_snapshots/<slot>/ ring with metadata.json, machine_identifier,
vm/active_profile.toml, runtime-config/ and, for a suspended persistent VM, checkpoint.vzsave.
0.x app dirs: capsem.log, and from 0.16 workspace/, system/ and auto_snapshots/.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

from datasette_capsem.generate.plan import SessionSpec
from datasette_capsem.ledger import eras

LEGACY_KINDS = ("legacy", "legacy_gz")


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _jsonl(records: list[dict]) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)


def _snapshot(directory: Path, slot: int, when: datetime, origin: str) -> None:
    base = directory / "auto_snapshots" / str(slot)
    (base / "workspace").mkdir(parents=True, exist_ok=True)
    (base / "system").mkdir(exist_ok=True)
    epoch_ms = int(when.timestamp() * 1000)
    meta = {
        "slot": slot,
        "timestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "epoch_secs": epoch_ms // 1000,
        "epoch_millis": epoch_ms,
        "origin": origin,
    }
    if origin == "manual":
        meta["name"] = "before-refactor"
    (base / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")


def write_dir_files(directory: Path, spec: SessionSpec) -> None:
    """Write the companions of ``directory``/session.db for ``spec``'s layout and era (bulk
    sessions, ``spec.lean_dir``, get the logs, guest/ and the symlinks only: the benchmark
    writes thousands)."""
    start = spec.start
    if spec.kind in LEGACY_KINDS:
        (directory / "capsem.log").write_text(
            _jsonl(
                [
                    {
                        "timestamp": _stamp(start),
                        "level": "INFO",
                        "target": "capsem_app",
                        "message": f"session {spec.id} started",
                    },
                    {
                        "timestamp": _stamp(start + timedelta(minutes=9)),
                        "level": "INFO",
                        "target": "capsem_app",
                        "message": "vm stopped",
                    },
                ]
            ),
            encoding="utf-8",
        )
        if spec.era == eras.V0_16.name:  # 0.16: workspace, system and the snapshot ring
            (directory / "workspace").mkdir(exist_ok=True)
            (directory / "system").mkdir(exist_ok=True)
            _snapshot(directory, 0, start + timedelta(minutes=5), "auto")
        return
    (directory / "process.log").write_text(
        _jsonl(
            [
                {
                    "timestamp": _stamp(start),
                    "level": "INFO",
                    "target": "capsem_process",
                    "fields": {"message": "ledger opened", "vm_id": spec.id},
                },
                {
                    "timestamp": _stamp(start + timedelta(seconds=2)),
                    "level": "INFO",
                    "target": "capsem_process::vsock",
                    "message": "guest agent connected",
                },
                {
                    "timestamp": _stamp(start + timedelta(minutes=30)),
                    "level": "INFO",
                    "target": "capsem_logger::writer",
                    "message": "final flush, wal_checkpoint(TRUNCATE)",
                },
            ]
        ),
        encoding="utf-8",
    )
    (directory / "serial.log").write_text(
        "[    0.000000] Linux version 6.12.8-capsem\n[    1.204311] capsem-init: ready\n",
        encoding="utf-8",
    )
    guest = directory / "guest"
    (guest / "system").mkdir(parents=True, exist_ok=True)
    (guest / "workspace").mkdir(exist_ok=True)
    for name in ("system", "workspace"):
        link = directory / name
        if not link.is_symlink():
            os.symlink(Path("guest") / name, link)
    if spec.lean_dir:
        return
    (directory / "pty.log").write_text("root@capsem:~/project# pytest -q\n3 passed\n")
    (directory / "mcp-aggregator.stderr.log").write_text("mcp-aggregator: 3 servers up\n")
    (directory / "mcp-aggregator.lock").write_text("")
    (directory / "machine_identifier").write_bytes(spec.id.encode()[:16].ljust(16, b"\0"))
    (directory / "vm").mkdir(exist_ok=True)
    profile = (spec.registry or {}).get("profile_id", "code")
    (directory / "vm" / "active_profile.toml").write_text(
        f'id = "{profile}"\nram_mb = 4096\n', encoding="utf-8"
    )
    (directory / "runtime-config").mkdir(exist_ok=True)
    (directory / "runtime-config" / "env.json").write_text('{"CAPSEM_VM": "1"}\n')
    (guest / "workspace" / "project").mkdir(exist_ok=True)
    (guest / "system" / "rootfs.img").write_bytes(b"")  # sparse overlay: empty here
    (guest / "workspace" / "project" / "README.md").write_text("# project\n")
    _snapshot(directory, 0, start + timedelta(minutes=5), "auto")
    if spec.mode == "persistent":
        _snapshot(directory, 10, start + timedelta(minutes=12), "manual")
    if (spec.registry or {}).get("checkpoint_path"):
        (directory / "checkpoint.vzsave").write_bytes(b"VZSAVE\0" + spec.id.encode())
        (directory / "checkpoint.vzsave.complete").write_text("")
