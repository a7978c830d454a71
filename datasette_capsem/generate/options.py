"""Options of one generated home."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenerateOptions:
    """What to write. Defaults give the small curated home every test uses.

    ``sessions`` adds that many bulk sessions (30% with a ledger on disk, the rest main.db rows
    only) to the curated set; ``None`` writes the curated set alone. ``broken_registry`` makes
    ``persistent_registry.json`` unparseable, which hides every display name of the home, so it
    is off by default and meant for a second home. ``old_main_db`` writes main.db in the
    pre-2026-06-24 shape that still has ``total_mcp_calls``.
    """

    seed: int = 1
    sessions: int | None = None
    traces_per_session: int = 3
    calls_per_trace: int = 3
    defects: bool = True
    hostile: bool = True
    broken: bool = True
    force: bool = False
    big_session_rows: int = 0
    broken_registry: bool = False
    old_main_db: bool = False
    workers: int = 0  # processes for bulk sessions; 0 = one per CPU when there are many

    def validate(self) -> None:
        """Raise ValueError on options that cannot describe a home."""
        for name in (
            "sessions",
            "traces_per_session",
            "calls_per_trace",
            "big_session_rows",
            "workers",
        ):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative (got {value})")
        if self.calls_per_trace < 1:
            raise ValueError("calls_per_trace must be at least 1")
