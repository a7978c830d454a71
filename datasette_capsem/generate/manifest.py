"""manifest.json: the ground truth of a generated home, compared against by tests and checks.

Shape (format 1): ``seed``, ``format``, ``main_db``, ``main_db_user_version``, ``registry``,
``sessions`` (one per id, in plan order), ``defects``, ``habits``, ``hostile`` and
``broken_files`` (sorted). Paths are relative to the home, with "/". ``defects`` has one entry
per offending row (row_id null for file-, table- and main.db-level kinds); ``clean`` is true
when a session has no defect entry and no broken file.

Habits are what Capsem's own writer does that looks wrong but is normal (spec §3.5, §4.3, §4.4,
§4.7); they never make a session unclean. Each session with a ledger has ``habits``:

- ``gemini_reused_ids``: Gemini call ids (``gemini_<name>_<i>``) emitted by more than one model
  call of a trace (i restarts in every response);
- ``unpairable_tool_ids``: ``{"tool_calls": [ids], "tool_responses": [ids]}``, rows whose call
  ids can never match by construction: every tool_responses row of an Ollama call
  (``ollama_tool_result_<message index>``, no tool calls are parsed from Ollama responses) and
  both sides of Gemini calls written 03-13..06-10 (bare name for calls, ``gemini_<name>_<n>``
  for results); the checker's finding kind is ``unpairable_tool_ids`` (info);
- ``ambient_trace``: the 16-hex CAPSEM_TRACE_ID(s) shared by non-tool model calls and ambient
  rows (empty before 1.1); a UUID trace is an agentic loop;
- ``truncated_blobs``: event_body_blobs ids with truncated=1 (body_hash covers the original
  bytes, so it cannot be verified from the ledger);
- ``provider_posts``: net_events ids of POSTs to model provider domains that are not model calls
  (OAuth token, client telemetry, uploads): ordinary traffic, no model call expected;
- ``end_turn_tool_calls``: model_calls ids that emitted tool calls with stop_reason end_turn
  (Gemini, OpenAI Responses API);
- ``results_in_another_trace``: tool_responses ids of results the writer put in another trace
  than their call, or under another id (a retry after a failed exchange, a resume, the Responses
  API's history, Gemini CLI's ids: ``generate/writer_paths.py``); the checker's finding kind is
  ``result_in_another_trace`` (info);
- ``legacy_run_zeros``: the main.db row is a capsem run row rolled up before 2026-06-27, with 0
  tokens, cost, tool calls, exec_count and audit_event_count while the ledger has rows;
- ``reader_left_wal``: a finished ledger someone read with sqlite3 mode=ro, leaving a 0-byte
  ``-wal`` and a 32 KiB ``-shm`` beside it (not a live writer).

The top-level ``habits`` list holds the same facts in the shape of ``defects`` (``kind``,
``session``, ``table``, ``row_id``): one entry per row for ``unpairable_tool_ids`` (tables
tool_calls and tool_responses), ``results_in_another_trace``, ``truncated_blobs``, ``provider_posts`` and
``end_turn_tool_calls``; one per session (row_id null) for ``gemini_reused_ids``,
``legacy_run_zeros`` (table ``sessions``) and ``reader_left_wal``.
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
        "habits": dict(result.habits) if result and result.habits else {},
    }


ROW_HABITS = {
    "results_in_another_trace": "tool_responses",
    "truncated_blobs": "event_body_blobs",
    "provider_posts": "net_events",
    "end_turn_tool_calls": "model_calls",
}


def habit_entries(session: str, habits: dict[str, Any]) -> list[dict[str, Any]]:
    """One session's habits in the shape of ``defects``."""
    entries = [
        {"kind": "unpairable_tool_ids", "session": session, "table": table, "row_id": rid}
        for table, rows in habits.get("unpairable_tool_ids", {}).items()
        for rid in rows
    ]
    for kind, table in ROW_HABITS.items():
        entries += [
            {"kind": kind, "session": session, "table": table, "row_id": rid}
            for rid in habits.get(kind, [])
        ]
    for kind, table in (
        ("gemini_reused_ids", "tool_calls"),
        ("legacy_run_zeros", "sessions"),
        ("reader_left_wal", None),
    ):
        if habits.get(kind):
            entries.append({"kind": kind, "session": session, "table": table, "row_id": None})
    return entries


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
    habits = [h for r in results.values() for h in habit_entries(r.id, r.habits)]
    return {
        "seed": seed,
        "format": FORMAT,
        "main_db": "sessions/main.db",
        "main_db_user_version": main_user_version,
        "registry": REGISTRY,
        "sessions": [session_entry(s, results.get(s.alias_of or s.id), dirty) for s in specs],
        "defects": sorted(defects, key=_key),
        "habits": sorted(habits, key=_key),
        "hostile": sorted(hostile, key=_key),
        "broken_files": sorted(broken, key=_key),
    }


def write_manifest(home: Path, manifest: dict[str, Any]) -> None:
    (home / "manifest.json").write_text(
        json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )


def load_manifest(home: Path) -> dict[str, Any]:
    return json.loads((home / "manifest.json").read_text(encoding="utf-8"))
