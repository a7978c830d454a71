"""A tiny stand-in for Capsem's writer, for fidelity tests: built from the spec, not the generator.

Ledgers are created from Capsem's real DDL (`tests/capsem_ddl/`, produced from its
`schema.rs`) and rows are written the way `writer.rs`, `telemetry_hook.rs` and the provider
interpreters write them (spec §4.3, §4.4), so a verdict that passes here is one about Capsem's
files, not about this project's generator.
"""

from __future__ import annotations

import json
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

    def model_call(
        self,
        second: int,
        trace: str,
        *,
        provider="anthropic",
        path="/v1/messages",
        stop="end_turn",
        model="claude-sonnet-4-20250514",
        **extra,
    ) -> int:
        protocol = {"google": "google", "ollama": "ollama", "openai": "openai"}.get(
            provider, "anthropic"
        )
        # Cost is 0 for every provider but anthropic, openai and google (spec §7).
        priced = provider in ("anthropic", "openai", "google")
        values = dict(
            event_id=new_event_id(),
            timestamp=stamp(second),
            provider=provider,
            protocol=protocol,
            model=model,
            method="POST",
            path=path,
            stream=1,
            request_body_preview='{"messages": []}',
            status_code=200,
            stop_reason=stop,
            input_tokens=100,
            output_tokens=20,
            duration_ms=900,
            estimated_cost_usd=0.001 if priced else 0.0,
            trace_id=trace,
            turn_id=trace,
        )
        return self.insert("model_calls", **{**values, **extra})

    def tool_call(
        self, model_call: int, call_id: str, name: str, trace: str, second: int, call_index: int = 0
    ) -> int:
        """A model-native call as insert_model_call writes it (status observed, server model)."""
        return self.insert(
            "tool_calls",
            event_id=new_event_id(),
            timestamp=stamp(second),
            model_call_id=model_call,
            provider="",
            status="observed",
            call_index=call_index,
            call_id=call_id,
            tool_name=name,
            arguments="{}",
            origin="native",
            transport="sse",
            server_name="model",
            decision="allowed",
            trace_id=trace,
            turn_id=trace,
        )

    def tool_response(self, model_call: int, call_id: str, trace: str) -> int:
        return self.insert(
            "tool_responses",
            model_call_id=model_call,
            call_id=call_id,
            content_preview='{"output": "ok"}',
            is_error=0,
            trace_id=trace,
            turn_id=trace,
        )

    def net(
        self,
        second: int,
        trace: str,
        *,
        domain="api.anthropic.com",
        path="/v1/messages",
        method="POST",
        decision="allowed",
        **extra,
    ) -> int:
        return self.insert(
            "net_events",
            event_id=new_event_id(),
            timestamp=stamp(second),
            domain=domain,
            port=extra.pop("port", 443),
            decision=decision,
            method=method,
            path=path,
            status_code=200,
            conn_type="https-mitm",
            trace_id=trace,
            turn_id=trace,
            **extra,
        )

    def close(self) -> None:
        self.conn.commit()
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the writer's clean shutdown
        self.conn.close()
        for suffix in ("-wal", "-shm"):  # Capsem's clean stop leaves neither behind
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


# -- The telemetry path of model traffic, ported from Capsem's code --------------------------
# A port of what capsem-core does with one model exchange (HEAD 4337ec32): the request parser's
# tool-result extraction (net/ai_traffic/request_parser.rs), the interpreters' call ids
# (net/interpreters/*), `TraceState` (net/ai_traffic/mod.rs:40-112) and the trace decision of
# `maybe_build_model_call` (net/mitm_proxy/telemetry_hook.rs:619-668). Requests go in as the
# agent sends them, rows come out as the writer writes them: tests assert verdicts on the rows
# without this project's generator in the loop.


class TraceState:
    """`TraceState`: pending tool call ids -> their trace (ai_traffic/mod.rs:40-112)."""

    def __init__(self) -> None:
        self.pending: dict[str, str] = {}

    def lookup(self, call_ids: list[str]) -> str | None:
        """The trace of the first result whose call is still pending (mod.rs:67-75)."""
        return next((self.pending[i] for i in call_ids if i in self.pending), None)

    def register_tool_calls(self, trace_id: str, call_ids: list[str]) -> None:
        for call_id in call_ids:
            self.pending[call_id] = trace_id

    def complete_trace(self, trace_id: str) -> None:
        """A non-tool stop forgets every pending call of the trace (mod.rs:108-112)."""
        self.pending = {k: v for k, v in self.pending.items() if v != trace_id}


def tool_results(protocol: str, request: dict) -> list[tuple[str, str]]:
    """(call_id, content) of the tool results the request parser logs (request_parser.rs)."""
    if protocol == "anthropic":  # the trailing user messages only (request_parser.rs:150-196)
        found = []
        for message in reversed(request.get("messages", [])):
            if message.get("role") != "user":
                break
            blocks = message.get("content")
            for block in blocks if isinstance(blocks, list) else []:
                if block.get("type") == "tool_result" and block.get("tool_use_id"):
                    found.append((block["tool_use_id"], str(block.get("content", ""))))
        return found
    if protocol == "openai" and "input" in request:  # Responses: every output (292-306)
        return [
            (item["call_id"], item.get("output", ""))
            for item in request["input"]
            if item.get("type") == "function_call_output" and item.get("call_id")
        ]
    if protocol == "openai":  # Chat Completions: the trailing role=tool messages (307-330)
        found = []
        for message in reversed(request.get("messages", [])):
            if message.get("role") != "tool":
                break
            found.append((message["tool_call_id"], str(message.get("content", ""))))
        return found
    if protocol == "google":  # trailing contents with functionResponse parts (420-455)
        found, counter = [], 0
        for content in reversed(request.get("contents", [])):
            parts = content.get("parts", [])
            if not any("functionResponse" in part for part in parts):
                break
            for part in parts:
                response = part.get("functionResponse")
                if response is None:
                    continue
                call_id = response.get("id") or f"gemini_{response.get('name', '')}_{counter}"
                found.append((call_id, json.dumps(response.get("response"))))
                counter += 1
        return found
    raise ValueError(f"no request parser for {protocol!r} in this port")


def response_call_ids(protocol: str, calls: list[dict]) -> list[tuple[str, str]]:
    """(call_id, name) of the tool calls an interpreter parses from a response: Gemini's
    `functionCall.id` when the API sends one (Code Assist), else `gemini_<name>_<index>`
    (google_interpreter.rs:201-205); the provider's own id elsewhere."""
    if protocol == "google":
        return [(c.get("id") or f"gemini_{c['name']}_{i}", c["name"]) for i, c in enumerate(calls)]
    return [(c["id"], c["name"]) for c in calls]


PROVIDER_OF = {"anthropic": "anthropic", "openai": "openai", "google": "google"}
PATH_OF = {
    "anthropic": "/v1/messages",
    "openai": "/v1/responses",
    "google": "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
}


@dataclass
class Writer:
    """One `capsem-process`: its TraceState and the ambient trace id the service gave it
    (`CAPSEM_TRACE_ID`, telemetry.rs:538-618). `restart` is a new process (a resume)."""

    ledger: Ledger
    ambient: str
    state: TraceState = field(default_factory=TraceState)
    second: int = 0

    def restart(self, ambient: str) -> None:
        """capsem-process/src/main.rs:414-416: a new process starts with an empty TraceState."""
        self.state, self.ambient = TraceState(), ambient

    def exchange(
        self,
        protocol: str,
        request: dict,
        *,
        calls: list[dict] = (),
        stop: str | None = "end_turn",
        status: int = 200,
        path: str | None = None,
    ) -> str:
        """One model exchange through `maybe_build_model_call`; returns the trace it joined.
        A failed exchange (status >= 400, or a stream cut) has no calls and no stop reason."""
        self.second += 1
        results = tool_results(protocol, request)
        parsed = response_call_ids(protocol, list(calls))
        call_ids = [call_id for call_id, _ in parsed]
        trace = self.state.lookup([call_id for call_id, _ in results])  # telemetry_hook.rs:627
        if trace is None:
            trace = self.ambient if not call_ids else str(uuid.uuid4())  # 628-635
        is_tool_use = bool(call_ids) or "tool" in (stop or "")
        if is_tool_use and call_ids:
            self.state.register_tool_calls(trace, call_ids)
        elif not is_tool_use:
            self.state.complete_trace(trace)  # 651-653
        model_call = self.ledger.model_call(
            self.second,
            trace,
            provider=PROVIDER_OF[protocol],
            path=path or PATH_OF[protocol],
            stop=stop,
            status_code=status,
            request_body_preview=json.dumps(request),
        )
        for index, (call_id, name) in enumerate(parsed):
            self.ledger.tool_call(model_call, call_id, name, trace, self.second, call_index=index)
        for call_id, _content in results:
            self.ledger.tool_response(model_call, call_id, trace)
        return trace
