"""run/persistent_registry.json: display names of persistent VMs (spec §2)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from datasette_capsem.generate.content import blake3_ref
from datasette_capsem.generate.hostile import PAYLOADS
from datasette_capsem.generate.plan import SessionSpec
from datasette_capsem.ledger import eras

REGISTRY = "run/persistent_registry.json"


def entry(home: Path, spec: SessionSpec, seed: int, hostile: bool) -> dict[str, Any]:
    """One PersistentVmEntry. session_dir is absolute, as the service writes it."""
    rng = random.Random(f"{seed}:registry:{spec.id}")
    extra = dict(spec.registry or {})
    profile = extra.pop("profile_id", "code")
    session_dir = (
        (home / spec.ledger).parent if spec.ledger else home / "run" / "persistent" / spec.id
    )
    value: dict[str, Any] = {
        "id": spec.id,
        "name": spec.name,
        "profile_id": profile,
        "profile_revision": "2026.07.30.2",
        "profile_payload_hash": blake3_ref(f"profile {profile}"),
        "asset_pins": {
            part: {"name": f"{part}-1.6.2", "hash": blake3_ref(f"{part} 1.6.2")}
            for part in ("kernel", "initrd", "rootfs")
        },
        "ram_mb": 4096,
        "cpus": rng.choice((2, 4, 8)),
        "base_version": "1.6.2" if spec.era == eras.HEAD.name else "1.2.1",
        "created_at": str(int(spec.start.timestamp())),
        "session_dir": str(session_dir.absolute()),
        "suspended": False,
        "defunct": False,
    }
    value.update(extra)
    if spec.name == "co-work-1":
        value["env"] = {
            "GITHUB_TOKEN": "ghp_FAKE0000000000000000000000000000000000",
            "EDITOR": "vim",
        }
        if hostile:
            value["description"] = f"team VM {PAYLOADS[1]}"
    return value


def write_registry(
    home: Path, specs: list[SessionSpec], seed: int, *, hostile: bool, broken: bool
) -> list[dict[str, Any]]:
    """Write the registry (pretty JSON keyed by name); returns hostile entries it carries."""
    vms = {
        s.name: entry(home, s, seed, hostile) for s in specs if s.registry is not None and s.name
    }
    text = json.dumps({"vms": vms}, indent=2, sort_keys=True) + "\n"
    if broken:
        text = text[: len(text) // 2]
    path = home / REGISTRY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    owner = next((s.id for s in specs if s.name == "co-work-1"), None)
    if hostile and owner:
        return [
            {
                "kind": "html_payload",
                "session": owner,
                "table": "persistent_registry.json",
                "column": "description",
                "row_id": None,
            }
        ]
    return []
