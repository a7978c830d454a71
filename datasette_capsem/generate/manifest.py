"""manifest.json: the ground truth of a generated home, compared against by tests and checks.

Shape (format 1): ``seed``, ``format``, ``main_db``, ``main_db_user_version``, ``registry``,
``sessions`` (one per id, in plan order), ``defects``, ``hostile`` and ``broken_files`` (sorted).
Paths are relative to the home, with "/". ``defects`` has one entry per offending row (row_id
null for file-, table- and main.db-level kinds); ``clean`` is true when a session has no defect
entry and no broken file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from datasette_capsem.generate.plan import SessionSpec
from datasette_capsem.generate.registry import REGISTRY
from datasette_capsem.generate.sessions import SessionResult

FORMAT = 1


def _key(entry: dict[str, Any]) -> tuple:
    return tuple(
        "" if entry.get(k) is None else str(entry[k]).zfill(12)
        for k in ("session", "kind", "table", "column", "row_id", "path")
    )


def session_entry(
    spec: SessionSpec, result: SessionResult | None, dirty: set[str]
) -> dict[str, Any]:
    owner = spec.alias_of or spec.id
    return {
        "id": spec.id,
        "name": spec.name,
        "kind": spec.kind,
        "era": spec.era,
        "ledger": spec.ledger,
        "main_db_row": spec.status is not None,
        "status": spec.status,
        "live": spec.live,
        "clean": owner not in dirty and not spec.broken,
        "broken": spec.broken,
        "alias_of": spec.alias_of,
        "forked_from": spec.forked_from,
        "counts": dict(result.counts) if result else {},
        "totals": dict(result.totals)
        if result
        else {"input_tokens": 0, "output_tokens": 0, "cost": 0.0},
        "traces": list(result.traces) if result else [],
    }


def build_manifest(
    seed: int,
    specs: list[SessionSpec],
    results: dict[str, SessionResult],
    extra_defects: list[dict[str, Any]],
    extra_hostile: list[dict[str, Any]],
    extra_broken: list[dict[str, Any]],
    main_user_version: int,
) -> dict[str, Any]:
    defects = [d for r in results.values() for d in r.defects] + extra_defects
    hostile = [h for r in results.values() for h in r.hostile] + extra_hostile
    broken = [b for r in results.values() for b in r.broken] + extra_broken
    dirty = {d["session"] for d in defects}
    return {
        "seed": seed,
        "format": FORMAT,
        "main_db": "sessions/main.db",
        "main_db_user_version": main_user_version,
        "registry": REGISTRY,
        "sessions": [session_entry(s, results.get(s.alias_of or s.id), dirty) for s in specs],
        "defects": sorted(defects, key=_key),
        "hostile": sorted(hostile, key=_key),
        "broken_files": sorted(broken, key=_key),
    }


def write_manifest(home: Path, manifest: dict[str, Any]) -> None:
    (home / "manifest.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )


def load_manifest(home: Path) -> dict[str, Any]:
    return json.loads((home / "manifest.json").read_text(encoding="utf-8"))
