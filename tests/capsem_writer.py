"""A tiny stand-in for Capsem's writer, for fidelity tests: built from the spec, not the generator.

Ledgers are created from Capsem's real DDL (`tests/capsem_ddl/`, produced from its
`schema.rs`) and rows are written the way `writer.rs`, `telemetry_hook.rs` and the provider
interpreters write them (spec §4.3, §4.4), so a verdict that passes here is one about Capsem's
files, not about this project's generator.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import blake3

DDL_DIR = Path(__file__).resolve().parent / "capsem_ddl"  # copied from schema.rs: see its README
HEAD = "session_head_2026-08-22.sql"
MAIN_HEAD = "main_head_2026-08-22.sql"


def ddl(name: str) -> str:
    return (DDL_DIR / name).read_text("utf-8")


def blake3_ref(data: bytes) -> str:
    return "blake3:" + blake3.blake3(data).hexdigest()


def stamp(second: int) -> str:
    """RFC 3339 with microseconds, as the writer formats timestamps since 2026-06-11."""
    return f"2026-08-20T10:{second // 60:02d}:{second % 60:02d}.000000Z"


def new_event_id() -> str:
    return uuid.uuid4().hex[:12]  # the writer: the first 12 hex of a UUID v4


@dataclass
class Ledger:
    """One session.db of a given era, written row by row; columns the era lacks are left out."""

    path: Path
    era: str = HEAD
    conn: sqlite3.Connection = field(init=False)
    columns: dict[str, set[str]] = field(init=False)

    def __post_init__(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path)
        self.conn.executescript(ddl(self.era))
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.columns = {
            table: {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
            for (table,) in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }

    def insert(self, table: str, **values) -> int:
        values = {k: v for k, v in values.items() if k in self.columns[table]}
        names = ", ".join(values)
        marks = ", ".join("?" * len(values))
        cursor = self.conn.execute(
            f"INSERT INTO {table} ({names}) VALUES ({marks})", list(values.values())
        )
        return cursor.lastrowid

    def model_call(self, second: int, trace: str, *, provider="anthropic", path="/v1/messages",
                   stop="end_turn", model="claude-sonnet-4-20250514", **extra) -> int:  # fmt: skip
        protocol = {"google": "google", "ollama": "ollama", "openai": "openai"}.get(
            provider, "anthropic"
        )
        # Cost is 0 for every provider but anthropic, openai and google (spec §7).
        priced = provider in ("anthropic", "openai", "google")
        values = dict(
            event_id=new_event_id(), timestamp=stamp(second), provider=provider,
            protocol=protocol, model=model, method="POST", path=path, stream=1,
            request_body_preview='{"messages": []}', status_code=200, stop_reason=stop,
            input_tokens=100, output_tokens=20, duration_ms=900,
            estimated_cost_usd=0.001 if priced else 0.0, trace_id=trace, turn_id=trace,
        )  # fmt: skip
        return self.insert("model_calls", **{**values, **extra})

    def tool_call(self, model_call: int, call_id: str, name: str, trace: str, second: int) -> int:
        """A model-native call as insert_model_call writes it (status observed, server model)."""
        return self.insert(
            "tool_calls", event_id=new_event_id(), timestamp=stamp(second),
            model_call_id=model_call, provider="", status="observed", call_index=0,
            call_id=call_id, tool_name=name, arguments="{}", origin="native", transport="sse",
            server_name="model", decision="allowed", trace_id=trace, turn_id=trace,
        )  # fmt: skip

    def tool_response(self, model_call: int, call_id: str, trace: str) -> int:
        return self.insert(
            "tool_responses", model_call_id=model_call, call_id=call_id,
            content_preview='{"output": "ok"}', is_error=0, trace_id=trace, turn_id=trace,
        )  # fmt: skip

    def net(self, second: int, trace: str, *, domain="api.anthropic.com", path="/v1/messages",
            method="POST", decision="allowed", **extra) -> int:  # fmt: skip
        return self.insert(
            "net_events", event_id=new_event_id(), timestamp=stamp(second), domain=domain,
            port=extra.pop("port", 443), decision=decision, method=method, path=path, status_code=200,
            conn_type="https-mitm", trace_id=trace, turn_id=trace, **extra,
        )  # fmt: skip

    def close(self) -> None:
        self.conn.commit()
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the writer's clean shutdown
        self.conn.close()
        for suffix in ("-wal", "-shm"):  # Capsem's clean stop leaves neither behind
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
