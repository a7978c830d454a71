"""Capsem's schema eras, named once (spec §4.5, tests/capsem_ddl/README.md).

session.db carries no version marker, and its shape changed many times. An era is named as
Capsem's history names it: a release (``"0.16"``, ``"1.3"``) or, for a schema change between
releases, the date of its commit (``"2026-06-24"``); ``"head"`` is Capsem's HEAD (2026-08-22).

One list serves both directions:

* reading (`ledger/schema.py`): the first era, newest first, whose `marker` table and columns a
  file has names the file's era. An era without a marker added nothing a reader can tell from the
  next older marked era (a HEAD file reads as "1.3", a 1.2 file as "1.1");
* writing (`generate/`): an era with a `ddl` file is one the generator writes, from Capsem's DDL
  of that era (`generate/schemas/`), with the kinds of rows its `traits` name.

`MIGRATED` is a file's history, not an era: a persistent VM's file created by 1.2 and re-opened
by 1.3, then HEAD. No other module spells an era's name (tests/test_eras.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Traits:
    """What kinds of rows a writer of an era recorded (spec §4.5): what the generator writes."""

    event_ids: bool = False  # event_id columns filled (06-06 on)
    turn_ids: bool = False  # turn_id written (06-24 on)
    items_and_blobs: bool = False  # model_items and event_body_blobs (06-14/06-15 on)
    security: bool = False  # security_* and substitution_events (06-06 on)
    host_events: bool = False  # dns_events, exec_events, audit_events
    mcp_in_tool_calls: bool = False  # MCP calls are tool_calls rows (else mcp_calls)
    nano: bool = False  # 9 fractional digits in timestamps (before 06-11)
    snapshots: bool = False  # snapshot_events rows
    ambient: bool = False  # CAPSEM_TRACE_ID: non-tool model calls join the session's ambient trace
    # How Gemini tool-call ids were written (spec §4.3): "bare" tool name on both sides
    # (03-01..03-13), "split" bare name for calls but gemini_<name>_<n> for results (03-13..06-10,
    # never pairable), "synth" gemini_<name>_<i> on both sides, i restarting in every response.
    gemini_ids: str = "bare"


@dataclass(frozen=True)
class Era:
    """One era of session.db, by Capsem's name."""

    name: str
    # (table, columns) a file of this era or later has; None: nothing tells it from the era before.
    marker: tuple[str, tuple[str, ...]] | None = None
    ddl: str | None = None  # Capsem's DDL (generate/schemas/) when the generator writes it
    traits: Traits | None = None  # the rows the generator writes for it (with `ddl`)
    note: str = ""


_OLD_APP = Traits(nano=True, gemini_ids="split")  # the 0.x Tauri app after 03-13
_RUN = Traits(host_events=True, nano=True, snapshots=True, ambient=True, gemini_ids="split")
_UNIFIED = Traits(
    event_ids=True,
    turn_ids=True,
    items_and_blobs=True,
    security=True,
    host_events=True,
    mcp_in_tool_calls=True,
    ambient=True,
    gemini_ids="synth",
)

HEAD = Era(
    "head",
    ddl="session_head_2026-08-22.sql",
    traits=_UNIFIED,
    note="HEAD: 15 tables, 81 indexes; no column 1.3 lacks, so a HEAD file reads as 1.3",
)
V1_3 = Era(
    "1.3",
    marker=("tool_calls", ("transport", "turn_id")),
    ddl="session_1.3_2026-06-27.sql",
    traits=_UNIFIED,
    note="1.3 release (2026-06-27), or later",
)
V1_2 = Era(
    "1.2",
    ddl="session_1.2_2026-05-24.sql",
    traits=_RUN,
    note="1.2 release: ai_*, journal, session_identity; reads as 1.1",
)
V1_1 = Era(
    "1.1",
    marker=("dns_events", ()),
    ddl="session_1.1_2026-05-11.sql",
    traits=_RUN,
    note="1.1 release (policy_hook_events)",
)
V0_16 = Era(
    "0.16",
    marker=("snapshot_events", ()),
    ddl="session_0.16_2026-04-02.sql",
    traits=Traits(nano=True, snapshots=True, gemini_ids="split"),
    note="0.16: snapshot_events (the legacy 0.x session dirs)",
)
V0_X_0313 = Era(
    "2026-03-13",
    ddl="session_0x_2026-03-13.sql",
    traits=_OLD_APP,
    note="0.x after mcp_calls.bytes_sent/received (03-13..04-01); reads as 0.9",
)
V0_9 = Era(
    "0.9",
    marker=("mcp_calls", ()),
    ddl="session_0x_2026-03-01.sql",
    traits=Traits(nano=True, gemini_ids="bare"),
    note="0.x as first written (03-01..03-13)",
)

# Newest first: reading takes the first era whose marker a file has.
ERAS: tuple[Era, ...] = (
    HEAD,
    V1_3,
    Era("2026-06-24", marker=("tool_calls", ("turn_id",))),
    Era("2026-06-22", marker=("tool_calls", ("decision",))),
    Era("2026-06-15", marker=("event_body_blobs", ())),
    Era("2026-06-14", marker=("model_items", ())),
    Era("1.3-dev", marker=("security_rule_events", ()), note="06-06"),
    V1_2,
    V1_1,
    Era("1.0", marker=("exec_events", ())),
    V0_16,
    V0_X_0313,
    V0_9,
    Era("0.8", marker=("model_calls", ())),
)

# A persistent VM's file: created by 1.2, re-opened by 1.3 then HEAD (migrate() only adds).
MIGRATED = Era("migrated", ddl="session_migrated_1.2-1.3-head.sql")

UNKNOWN = "unknown"  # what reading says of a file no marker matches

# What the generator writes, oldest first: every era with Capsem's DDL, then the migrated file.
WRITTEN: tuple[Era, ...] = (*(era for era in reversed(ERAS) if era.ddl), MIGRATED)
BY_NAME: dict[str, Era] = {era.name: era for era in (*ERAS, MIGRATED)}
NAMES: tuple[str, ...] = tuple(BY_NAME)


def era(name: str) -> Era:
    """The era called `name`; a KeyError names the unknown era."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no era {name!r}; known: {', '.join(NAMES)}") from None


def traits(name: str) -> Traits:
    """What the generator writes for era `name` (one of `WRITTEN` with traits)."""
    found = era(name).traits
    if found is None:
        raise KeyError(f"the generator writes no rows of era {name!r}")
    return found
