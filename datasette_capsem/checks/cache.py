"""Integrity reports of the sessions viewed lately, cached per file version.

Built once per Datasette instance (`state.CapsemState.reports`); the overview, the trace page
and the event pages read the rule book's findings through it, so a view of an unchanged ledger
never runs the checks again.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

REPORT_CACHE_ENTRIES = 128
# Some checks read the clock (a `running` row whose WAL is a day old), so even an unchanged
# file gets a fresh report this often.
REPORT_MAX_AGE_SECONDS = 300.0


@dataclass
class CachedReport:
    validator: Hashable
    computed_at: float  # epoch seconds when the run started: the state it describes
    report: Any  # a report dict, or the rule book's RowVerdicts


class ReportCache:
    """Integrity reports of the sessions viewed lately, one per (session id, profile).

    An entry holds while its validator (the ledger's size and mtime, its -wal's, the main.db
    row and liveness) is unchanged and it is younger than `max_age`. Concurrent views of a
    session whose report is missing share one run. Owned by one Datasette instance (its
    `CapsemState`), bounded to `size` entries, least recently used evicted first.
    """

    def __init__(self, size: int = REPORT_CACHE_ENTRIES, max_age: float = REPORT_MAX_AGE_SECONDS):
        self.size, self.max_age = size, max_age
        self.runs = 0  # reports computed (each runs the whole profile once)
        self.hits = 0  # views answered from the cache
        self._entries: OrderedDict[Hashable, CachedReport] = OrderedDict()
        self._running: dict[Hashable, tuple[Hashable, asyncio.Future]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def fresh(self, key: Hashable, validator: Hashable) -> CachedReport | None:
        entry = self._entries.get(key)
        if entry is None or entry.validator != validator:
            return None
        if time.time() - entry.computed_at > self.max_age:
            return None
        self._entries.move_to_end(key)
        return entry

    async def get(
        self,
        key: Hashable,
        validator: Hashable,
        compute: Callable[[], Awaitable[dict[str, Any]]],
    ) -> tuple[CachedReport, bool]:
        """(entry, cached): the held report if still valid, else one computed now."""
        entry = self.fresh(key, validator)
        if entry is not None:
            self.hits += 1
            return entry, True
        running = self._running.get(key)
        if running is None or running[0] != validator:
            task = asyncio.ensure_future(self._compute(key, validator, compute))
            running = self._running[key] = (validator, task)
        # shield: a view that is cancelled (its client left) does not cancel the others' run
        return await asyncio.shield(running[1]), False

    async def _compute(self, key, validator, compute) -> CachedReport:
        try:
            started = time.time()
            report = await compute()
            self.runs += 1
            entry = CachedReport(validator, started, report)
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
            return entry
        finally:
            held = self._running.get(key)
            if held is not None and held[0] == validator:
                del self._running[key]
