"""Which sessions a home holds: ids, names, layouts, eras and the defects each one carries.

The plan is pure data drawn from the seed, so the writer (possibly in several processes) can
build any session independently and still produce the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

from datasette_capsem.generate.content import SessionShape, hex_id, new_uuid
from datasette_capsem.generate.defects import ROW_INJECTORS
from datasette_capsem.generate.options import GenerateOptions
from datasette_capsem.ledger import eras

CURRENT_START = datetime(2026, 8, 1, 8, 0, tzinfo=timezone.utc)
V1_1_START = datetime(2026, 5, 14, 10, 0, tzinfo=timezone.utc)
LEGACY_START = datetime(2026, 4, 1, 9, 30, tzinfo=timezone.utc)
MIGRATED_START = datetime(2026, 5, 27, 15, 0, tzinfo=timezone.utc)
V0_9_START = datetime(2026, 3, 5, 14, 20, tzinfo=timezone.utc)
V0_10_START = datetime(2026, 3, 20, 9, 5, tzinfo=timezone.utc)
V1_2_START = datetime(2026, 5, 25, 16, 40, tzinfo=timezone.utc)
V1_3_START = datetime(2026, 7, 2, 11, 15, tzinfo=timezone.utc)
BROKEN_KINDS = ("zero_bytes", "truncated", "not_sqlite", "unreadable", "wal_without_shm")


@dataclass
class SessionSpec:
    """One session of the home. ``status`` None means no main.db row; ``ledger`` None means no
    file on disk (relative to the home)."""

    id: str
    kind: str
    era: str | None
    start: datetime
    ledger: str | None = None
    status: str | None = None
    mode: str = "ephemeral"
    name: str | None = None
    shape: SessionShape = field(default_factory=SessionShape)
    defects: tuple[
        str, ...
    ] = ()  # ROW_INJECTORS keys plus schema_not_ready/unclean_wal/rollup_mismatch/stale_running
    hostile: bool = False
    broken: str | None = None
    live: bool = False
    writer_paths: tuple[str, ...] = ()  # writer_paths.PATHS keys: results away from their call
    alias_of: str | None = None
    registry: dict | None = None  # registry entry fields beyond id/name/session_dir
    forked_from: str | None = None
    fork_parent: SessionSpec | None = None  # whose ledger this one starts as a copy of
    command: str | None = None
    bulk_totals: bool = False  # main.db-only row: draw plausible counters
    reader_wal: bool = False  # finished, then read with sqlite3 mode=ro: 0-byte -wal, 32 KiB -shm
    lean_dir: bool = False  # bulk: only the main companions of session.db in its dir


# Rollup restored in 1.3 (06-27): capsem run rows stopped before then were written with zeros
# for these (spec §3.5), while their ledgers have rows.
RUN_ROLLUP_RESTORED = datetime(2026, 6, 27, tzinfo=timezone.utc)
LEGACY_RUN_ZEROED = (
    "total_input_tokens",
    "total_output_tokens",
    "total_estimated_cost",
    "total_tool_calls",
    "exec_count",
    "audit_event_count",
)


def legacy_run_zeros(spec: SessionSpec) -> bool:
    """A capsem run row rolled up by a 1.0-1.2 service: tokens, cost, tool calls, execs and
    audit events written as 0."""
    return spec.mode == "run" and spec.status is not None and spec.start < RUN_ROLLUP_RESTORED


def session_stamp(rng: random.Random, when: datetime) -> str:
    """``YYYYMMDD-HHMMSS-xxxx``, Capsem's generate_session_id() (0.x ids, -failed- suffixes)."""
    return when.strftime("%Y%m%d-%H%M%S-") + hex_id(rng, 4)


def _dir(kind: str, sid: str) -> str:
    base = "run/persistent" if kind == "persistent" else "run/sessions"
    return f"{base}/{sid}/session.db"


class Planner:
    """Accumulates specs with start times spread an hour apart."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"{seed}:plan")
        self.specs: list[SessionSpec] = []
        self.clock = CURRENT_START

    def next_start(self) -> datetime:
        self.clock += timedelta(minutes=self.rng.randint(20, 140))
        return self.clock

    def add(
        self,
        kind: str,
        *,
        sid: str | None = None,
        era: str | None = eras.HEAD.name,
        on_disk: bool = True,
        **fields,
    ) -> SessionSpec:
        sid = sid or new_uuid(self.rng)
        start = fields.pop("start", None) or self.next_start()
        ledger = fields.pop("ledger", None) or (_dir(kind, sid) if on_disk else None)
        spec = SessionSpec(
            id=sid, kind=kind, era=era if on_disk else None, start=start, ledger=ledger, **fields
        )
        self.specs.append(spec)
        return spec


def curated(planner: Planner, options: GenerateOptions) -> None:
    """The small home: every layout, era, defect kind, hostile and broken case."""
    shape = SessionShape(traces=options.traces_per_session, calls=options.calls_per_trace)
    p = planner
    p.add("ephemeral", status="stopped", shape=_with(shape, providers=("anthropic",)))
    p.add(
        "ephemeral",
        status="stopped",
        shape=_with(shape, providers=("openai", "google", "ollama"), upload=True),
    )
    cowork = p.add(
        "persistent",
        mode="persistent",
        status="stopped",
        reader_wal=True,
        name="co-work-1",
        shape=_with(shape, providers=("anthropic", "openai"), openai_chat=True),
        registry={"profile_id": "co-work"},
    )
    p.add(
        "run",
        sid="code-3",
        mode="run",
        status="stopped",
        shape=_with(shape, providers=("anthropic",)),
    )
    p.add(
        "run",
        sid="co-work-2",
        mode="run",
        status="stopped",
        shape=_with(shape, providers=("google",)),
    )
    # A persistent VM whose display name is another session's id (code-3 above).
    p.add(
        "persistent",
        mode="persistent",
        status="stopped",
        name="code-3",
        shape=_with(shape, providers=("google",)),
        registry={"profile_id": "code", "suspended": True, "checkpoint_path": "checkpoint.vzsave"},
    )
    p.add(
        "persistent",
        mode="persistent",
        status="stopped",
        name="co-work-1-fork",
        forked_from=cowork.name,
        fork_parent=cowork,
        shape=_with(shape, providers=("ollama",)),
        registry={
            "profile_id": "co-work",
            "forked_from": cowork.name,
            "description": "fork of co-work-1 for the parser refactor",
        },
    )
    failed_id = new_uuid(p.rng)
    failed_start = p.next_start()
    failed_dir = f"run/sessions/{failed_id}-failed-{session_stamp(p.rng, failed_start + timedelta(minutes=40))}/session.db"
    p.add(
        "failed",
        sid=failed_id,
        start=failed_start,
        ledger=failed_dir,
        status="crashed",
        shape=_with(shape, providers=("anthropic",), interrupted=options.defects),
    )
    p.add(
        "ephemeral",
        status="running",
        live=True,
        shape=_with(shape, providers=("anthropic", "openai")),
    )
    # 1.1-era temporary VM: its dir survives, and 1.1 wrote no main.db row for it.
    p.add(
        "ephemeral",
        sid="bright-otter-tmp",
        era=eras.V1_1.name,
        start=V1_1_START,
        shape=_with(shape, providers=("google",)),
    )
    other_eras(p, shape)
    legacy_id = session_stamp(p.rng, LEGACY_START)
    p.add(
        "legacy",
        sid=legacy_id,
        era=eras.V0_16.name,
        start=LEGACY_START,
        ledger=f"sessions/{legacy_id}/session.db",
        mode="gui",
        status="stopped",
        shape=_with(shape, providers=("anthropic",)),
    )
    gz_start = LEGACY_START + timedelta(days=1, hours=6)
    gz_id = session_stamp(p.rng, gz_start)
    p.add(
        "legacy_gz",
        sid=gz_id,
        era=eras.V0_16.name,
        start=gz_start,
        ledger=f"sessions/{gz_id}/session.db.gz",
        mode="cli",
        command="claude -p 'fix the flaky test'",
        status="vacuumed",
        shape=_with(shape, providers=("google",)),
    )
    # Created by 1.2 under its name, given a UUID by the registry backfill: two ids, one dir.
    vm_id = new_uuid(p.rng)
    p.add(
        "persistent",
        sid=vm_id,
        era=eras.MIGRATED.name,
        start=MIGRATED_START,
        ledger="run/persistent/code-vm1/session.db",
        mode="persistent",
        status="stopped",
        name="code-vm1",
        shape=_with(shape, providers=("anthropic",)),
        registry={"profile_id": "code"},
        defects=("bad_event_id", "bad_credential_ref") if options.defects else (),
    )
    p.add(
        "persistent",
        sid="code-vm1",
        era=eras.MIGRATED.name,
        start=MIGRATED_START,
        ledger="run/persistent/code-vm1/session.db",
        mode="persistent",
        status="stopped",
        alias_of=vm_id,
    )
    p.add(
        "registry_only",
        on_disk=False,
        name="scratch-vm",
        registry={
            "profile_id": "code",
            "defunct": True,
            "last_error": "capsem-process exited with status 1: rootfs pin mismatch",
        },
    )
    main_only(p)
    if options.defects:
        defect_sessions(p)
    if options.hostile:
        p.add(
            "ephemeral",
            status="stopped",
            hostile=True,
            shape=SessionShape(traces=2, calls=3, providers=("anthropic",)),
        )
    if options.broken:
        for kind in BROKEN_KINDS:
            p.add("ephemeral", broken=kind, shape=SessionShape(traces=1, calls=2))
    if options.defects:
        headline_sessions(p)
        writer_path_sessions(p)


# The README's tour follows these: the headline cases on persistent VMs with display names.
HEADLINE_SESSIONS = (
    ("tour-unanswered-call", ("tool_call_without_response",), "stopped"),
    ("tour-broken-trace", ("orphan_tool_response",), "stopped"),
    ("tour-rollup-mismatch", ("rollup_mismatch",), "stopped"),
    ("tour-live", (), "running"),
)


def writer_path_sessions(p: Planner) -> None:
    """One session per writer path that puts a tool result away from its call (spec §4.4),
    planned after the headline sessions so no other session of the home changed."""
    for path in ("retry", "resume", "history", "gemini_cli"):
        p.add(
            "ephemeral",
            status="stopped",
            writer_paths=(path,),
            shape=SessionShape(traces=1, calls=2, providers=("anthropic",)),
        )


def headline_sessions(p: Planner) -> None:
    """Named sessions carrying the headline cases (planned last, so adding them changed no
    other session of the home)."""
    for name, defects, status in HEADLINE_SESSIONS:
        p.add(
            "persistent",
            mode="persistent",
            status=status,
            live=status == "running",
            name=name,
            defects=tuple(d for d in defects if d != "tool_call_without_response"),
            shape=SessionShape(
                traces=2,
                calls=3,
                providers=("anthropic",),
                interrupted="tool_call_without_response" in defects,  # the last call unanswered
            ),
            registry={"profile_id": "tour"},
        )


def other_eras(p: Planner, shape: SessionShape) -> None:
    """One ledger of each remaining DDL era (capsem-ddl/): two 0.x app dirs, a 1.2 capsem run
    (main.db row zeroed, spec §3.5) and a 1.3 VM."""
    for era, when, mode, providers, command in (
        (eras.V0_9.name, V0_9_START, "gui", ("google", "anthropic"), None),
        (eras.V0_X_0313.name, V0_10_START, "cli", ("google",), "gemini -p 'summarise the repo'"),
    ):
        sid = session_stamp(p.rng, when)
        p.add(
            "legacy",
            sid=sid,
            era=era,
            start=when,
            ledger=f"sessions/{sid}/session.db",
            mode=mode,
            command=command,
            status="stopped",
            reader_wal=era == eras.V0_X_0313.name,
            shape=_with(shape, providers=providers),
        )
    p.add(
        "run",
        sid=f"vm-{int(V1_2_START.timestamp())}",
        era=eras.V1_2.name,
        start=V1_2_START,
        mode="run",
        status="stopped",
        command="capsem run -- claude -p 'triage the flaky tests'",
        shape=_with(shape, providers=("anthropic", "google")),
    )
    p.add(
        "ephemeral",
        era=eras.V1_3.name,
        start=V1_3_START,
        status="stopped",
        reader_wal=True,
        shape=_with(shape, providers=("openai", "ollama"), openai_chat=True),
    )


def main_only(p: Planner) -> None:
    """main.db rows whose dirs Capsem deleted (stopped ephemerals) or never had."""
    for _ in range(6):
        p.add("ephemeral", on_disk=False, status="stopped", bulk_totals=True)
    p.add("ephemeral", on_disk=False, status="crashed", bulk_totals=True)
    p.add(
        "run",
        sid=f"vm-{1775300000 + p.rng.randint(0, 99999)}",
        on_disk=False,
        mode="run",
        status="stopped",
        bulk_totals=True,
        start=datetime(2026, 4, 8, 11, 0, tzinfo=timezone.utc),
    )
    when = datetime(2026, 3, 10, 10, 10, tzinfo=timezone.utc)
    p.add(
        "legacy",
        sid=session_stamp(p.rng, when),
        on_disk=False,
        mode="cli",
        status="terminated",
        command="gemini -p 'list TODOs'",
        bulk_totals=True,
        start=when,
    )


def defect_sessions(p: Planner) -> None:
    """One current-era session per injected defect kind, so each finding has one home."""
    for kind in ROW_INJECTORS:
        traces = 0 if kind == "ai_traffic_unparsed" else 2
        providers = ("anthropic", "openai") if kind == "model_call_quality" else ("anthropic",)
        p.add(
            "ephemeral",
            status="stopped",
            defects=(kind,),
            shape=SessionShape(traces=traces, calls=3, providers=providers),
        )
    # Genuine orphan responses in the sessions whose writers have id habits (a Gemini call id
    # never emitted in the trace; a non-Ollama id in an Ollama call), beside the habit itself.
    for providers in (("google",), ("ollama",)):
        p.add(
            "ephemeral",
            status="stopped",
            defects=("orphan_tool_response",),
            shape=SessionShape(traces=2, calls=3, providers=providers),
        )
    for kind in ("schema_not_ready", "unclean_wal", "rollup_mismatch"):
        p.add(
            "ephemeral",
            status="stopped",
            defects=(kind,),
            shape=SessionShape(traces=2, calls=2, providers=("openai",)),
        )
    p.add("ephemeral", on_disk=False, status="running", defects=("stale_running",))


def bulk(p: Planner, options: GenerateOptions) -> None:
    """``options.sessions`` extra sessions: 3 in 10 with a ledger, the rest main.db rows."""
    shape = SessionShape(
        traces=options.traces_per_session, calls=options.calls_per_trace, ask=False
    )
    providers = (("anthropic",), ("openai",), ("google",), ("anthropic", "ollama"))
    for index in range(options.sessions or 0):
        slot = index % 10
        s = _with(shape, providers=providers[index % len(providers)])
        if slot == 0:
            p.add("ephemeral", status="stopped", shape=s, reader_wal=index % 40 == 0, lean_dir=True)
        elif slot == 1:
            p.add(
                "persistent",
                mode="persistent",
                status="stopped",
                name=f"bulk-vm{index}",
                shape=s,
                lean_dir=True,
                registry={"profile_id": "code"},
            )
        elif slot == 2:
            p.add(
                "run",
                sid=f"code-{100 + index}",
                mode="run",
                status="stopped",
                shape=s,
                lean_dir=True,
            )
        else:
            p.add("ephemeral", on_disk=False, status="stopped", bulk_totals=True)


def big(p: Planner, options: GenerateOptions) -> None:
    """One long persistent session of at least ``big_session_rows`` rows."""
    if options.big_session_rows <= 0:
        return
    shape = SessionShape(
        traces=1,
        calls=10,
        providers=("anthropic", "openai", "google"),
        min_rows=options.big_session_rows,
    )
    p.add(
        "persistent",
        mode="persistent",
        status="stopped",
        name="big-vm1",
        shape=shape,
        registry={"profile_id": "code"},
    )


def _with(shape: SessionShape, **changes) -> SessionShape:
    return replace(shape, **changes)


def tour_on_top(specs: list[SessionSpec]) -> None:
    """The README's tour sessions start after every other session, in the tour's order, so the
    list (newest first) opens on them: the first thing the demo shows is what it is for. Only
    their times move (rows are written from `start` later, and no random draw depends on it)."""
    names = [name for name, _defects, _status in HEADLINE_SESSIONS]
    tour = sorted((s for s in specs if s.name in names), key=lambda s: names.index(s.name))
    if not tour:
        return
    latest = max(s.start for s in specs if s.name not in names)
    for place, spec in enumerate(tour):
        spec.start = latest + timedelta(hours=len(tour) - place)


def make_plan(options: GenerateOptions) -> list[SessionSpec]:
    planner = Planner(options.seed)
    curated(planner, options)
    big(planner, options)
    bulk(planner, options)
    tour_on_top(planner.specs)
    return planner.specs
