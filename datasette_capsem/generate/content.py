"""Realistic ledger content: agentic traces and the host events around them (spec §4).

One ``Builder`` writes the rows of one session into a ``Ledger``. The same builder serves every
schema era; its ``Traits`` (ledger/eras.py) say which kinds of rows the era had, and columns an era lacks are
dropped at insert time.
"""

from __future__ import annotations

import functools
import json
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from datasette_capsem.generate import vocabulary
from datasette_capsem.generate.rows import Ledger
from datasette_capsem.ledger import bodies, eras

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
TITLE_PROMPT = "Write a five-word title for this conversation."
SYSTEM_PROMPT = "You are a coding agent running inside a Capsem sandbox. Work in /root/project."


# Blobs keep at most this many bytes (MAX_BODY_BLOB_BYTES); body_hash covers the original.
MAX_BODY_BLOB_BYTES = 10 * 1024 * 1024

SHELL_TOOLS = {"Bash", "shell", "run_shell_command", "bash"}
WRITE_TOOLS = {"Edit", "Write", "apply_patch", "write_file", "replace", "edit"}


def new_uuid(rng: random.Random) -> str:
    """A UUID v4 drawn from ``rng`` (reproducible, unlike uuid.uuid4)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def hex_id(rng: random.Random, digits: int = 12) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


def blake3_ref(data: bytes | str) -> str:
    """``blake3:<64 hex>`` of ``data`` (text as UTF-8), the format of every *_hash column."""
    return bodies.blake3_ref(data.encode() if isinstance(data, str) else data)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def item_hash(kind: str, call_id: str, tool_name: Any, arguments: Any, content: Any) -> str:
    """model_items.content_hash: blake3 of the JSON of the item's identity (spec §4.4)."""
    return blake3_ref(
        dumps(
            {
                "kind": kind,
                "call_id": call_id,
                "tool_name": str(tool_name),
                "arguments": str(arguments),
                "content": str(content),
            }
        )
    )


def cost_usd(
    provider: str, model: str | None, inp: int | None, out: int | None, cache: int
) -> float:
    """Capsem's estimate (spec §7): ((input - cache_read) * in + output * out) / 1e6."""
    prices = vocabulary.PROVIDERS[provider].models.get(model or "")
    if provider not in vocabulary.PRICED or not prices or inp is None or out is None:
        return 0.0
    return (max(inp - cache, 0) * prices[0] + out * prices[1]) / 1e6


# APIs whose stop_reason marks tool turns (tool_use); the others end every turn with end_turn.
TOOL_STOP_APIS = frozenset({"anthropic", "chat"})


def api_path(provider: vocabulary.Provider, model: str) -> tuple[str, str]:
    """(request path, API family) of a model call: OpenAI's gpt-4.1 goes through chat
    completions, its other models through the Responses API."""
    if provider.name == "openai":
        return (
            ("/v1/chat/completions", "chat") if model == "gpt-4.1" else (provider.path, "responses")
        )
    return provider.path.format(model=model), provider.name


class Builder:
    """Appends one session's rows to a ledger, advancing a private clock."""

    def __init__(
        self,
        rng: random.Random,
        era: str,
        start: datetime,
        ledger: Ledger | None = None,
        ambient: str | None = None,
    ) -> None:
        self.rng = rng
        self.era = eras.traits(era)
        self.t = start
        self.ledger = ledger or Ledger()
        # CAPSEM_TRACE_ID: 16 hex, one per VM process; UUIDs are agentic loops (spec §4.4).
        self.ambient = ambient or hex_id(rng, 16)
        # Writer habits of this session, for the manifest (see manifest.py).
        self.unpairable: list[int] = []  # tool_responses rows no call id can ever match
        self.unpairable_calls: list[int] = []  # tool_calls rows no result id can ever match
        self.truncated: list[int] = []  # event_body_blobs rows with truncated=1
        self.provider_posts: list[int] = []  # non-model POSTs to model provider domains
        self.end_turn_tools: list[int] = []  # model calls with tool calls but stop end_turn
        self.results_in_another_trace: list[int] = []  # tool_responses rows (writer_paths.py)
        # (trace, call id) -> the model calls that emitted it
        self.gemini_ids: dict[tuple[str, str], set[int]] = {}
        self.inherited_ambient: list[str] = []  # ambient traces of rows this builder continues
        # (table, column, value, row id) written after the inserts past CHECK constraints.
        self.forced: list[tuple[str, str, Any, int]] = []
        self.exec_id = 0
        self.pid = rng.randint(300, 900)
        self.credential = "credential:blake3:" + hex_id(rng, 64)
        self.jsonrpc: dict[str, int] = {}
        self.item_keys: set[tuple[str, str, str, str]] = set()

    # -- clock and identity -------------------------------------------------------------
    def tick(self, lo_ms: int = 5, hi_ms: int = 900) -> None:
        self.t += timedelta(microseconds=self.rng.randint(lo_ms * 1000, hi_ms * 1000))

    def ts(self) -> str:
        """RFC 3339 UTC, microseconds (nanoseconds before 2026-06-11)."""
        text = self.t.strftime("%Y-%m-%dT%H:%M:%S.%f")
        return text + ("000Z" if self.era.nano else "Z")

    def ms(self) -> int:
        return (self.t - EPOCH) // timedelta(milliseconds=1)

    def event_id(self) -> str | None:
        return hex_id(self.rng) if self.era.event_ids else None

    def turn(self, trace: str | None) -> str | None:
        return trace if self.era.turn_ids else None

    def cred(self) -> str | None:
        return self.credential if self.era.security else None

    # -- security ledger ----------------------------------------------------------------
    def rule(
        self, event_type: str, event_id: str | None, action: str = "allow", **extra: Any
    ) -> int | None:
        """One security_rule_events row for ``event_id`` (current era only)."""
        if not self.era.security or event_id is None:
            return None
        rule_id = extra.pop("rule_id", f"{event_type.split('.')[0]}.{action}.default")
        summary = extra.pop("summary", event_type)
        return self.ledger.add(
            "security_rule_events",
            timestamp_unix_ms=self.ms(),
            event_id=event_id,
            event_type=event_type,
            rule_id=rule_id,
            rule_action=action,
            detection_level=extra.pop("level", "none"),
            rule_json=dumps({"id": rule_id, "action": action, "event_type": event_type}),
            event_json=dumps({"event_id": event_id, "event_type": event_type, "summary": summary}),
            trace_id=extra.pop("trace_id", None),
            turn_id=None,
            credential_ref=None,
        )

    def decision(
        self, event_type: str, event_id: str | None, effective: str = "allow", **extra: Any
    ) -> None:
        if not self.era.security or event_id is None:
            return
        self.ledger.add(
            "security_decision_events",
            timestamp_unix_ms=self.ms(),
            event_id=event_id,
            event_type=event_type,
            stage=extra.get("stage", "rule"),
            actor=extra.get("actor", "policy"),
            rule_id=extra.get("rule_id", f"{event_type.split('.')[0]}.{effective}.default"),
            plugin_id=None,
            previous_decision=extra.get("previous", "allow"),
            requested_decision=extra.get("requested", effective),
            effective_decision=effective,
            reason=extra.get("reason"),
            event_json=dumps({"event_id": event_id, "event_type": event_type}),
            trace_id=None,
            turn_id=None,
            credential_ref=None,
        )

    def blob(
        self,
        source: str,
        event_type: str,
        event_id: str | None,
        direction: str,
        body: bytes,
        trace: str | None,
        content_type: str = "application/json",
        body_hash: str | None = None,
    ) -> None:
        """An event_body_blobs row. body_hash is blake3 of the original captured bytes; a body
        over 10 MiB keeps its first 10 MiB only (truncated=1), so its hash cannot be verified
        from the ledger (spec §4.4). Pass ``body_hash`` when it is already known."""
        if not self.era.items_and_blobs or event_id is None:
            return
        stored = body[:MAX_BODY_BLOB_BYTES]
        rid = self.ledger.add(
            "event_body_blobs",
            event_id=event_id,
            event_type=event_type,
            source_table=source,
            direction=direction,
            content_type=content_type,
            original_bytes=len(body),
            stored_bytes=len(stored),
            truncated=int(len(stored) < len(body)),
            body_hash=body_hash or blake3_ref(body),
            body=stored,
            trace_id=trace,
            turn_id=self.turn(trace),
            created_at=self.ts(),
        )
        if len(stored) < len(body):
            self.truncated.append(rid)

    # -- host events --------------------------------------------------------------------
    def dns(self, qname: str, decision: str = "allowed", trace: str | None = None) -> None:
        if not self.era.host_events:
            return
        eid = self.event_id()
        trace = trace or self.ambient
        denied = decision == "denied"
        self.ledger.add(
            "dns_events",
            event_id=eid,
            timestamp=self.ts(),
            qname=qname,
            qtype=self.rng.choice((1, 1, 28)),
            qclass=1,
            rcode=3 if denied else 0,
            answer_ip=None
            if denied
            else f"104.18.{self.rng.randint(0, 255)}.{self.rng.randint(1, 254)}",
            decision=decision,
            matched_rule="dns.block.default" if denied else "dns.allow.default",
            source_proto="udp",
            process_name="systemd-resolved",
            upstream_resolver_ms=self.rng.randint(2, 60),
            trace_id=trace,
            turn_id=self.turn(trace),
            policy_mode="enforce",
            policy_action="block" if denied else "allow",
            policy_rule="dns.default",
            policy_reason=None,
            credential_ref=None,
        )
        self.rule("dns.query", eid, "block" if denied else "allow", trace_id=trace, summary=qname)
        self.tick(1, 20)

    def net(
        self,
        domain: str,
        path: str,
        decision: str,
        status: int,
        *,
        method: str = "GET",
        trace: str | None = None,
        request: str | None = None,
        response: str | None = None,
        ai: bool = False,
        port: int = 443,
        capture: bool | None = None,
        request_bytes: int | None = None,
    ) -> tuple[int, str | None]:
        """One net_events row (plus its rule, decision and, for AI traffic or another captured
        body, body blobs). Port 443 is HTTPS through the MITM proxy; others are plain HTTP."""
        eid = self.event_id()
        trace = trace or self.ambient
        denied = decision == "denied"
        req_bytes = (
            request_bytes
            if request_bytes is not None
            else len(request or "") + self.rng.randint(200, 600)
        )
        resp_bytes = len(response or "") + self.rng.randint(100, 400)
        rid = self.ledger.add(
            "net_events",
            event_id=eid,
            timestamp=self.ts(),
            domain=domain,
            port=port,
            decision=decision,
            process_name=self.rng.choice(("claude", "python3", "git", "node")) if not ai else None,
            pid=self.pid,
            method=method,
            path=path,
            query=None,
            status_code=status,
            bytes_sent=req_bytes,
            bytes_received=0 if denied else resp_bytes,
            duration_ms=self.rng.randint(20, 2500),
            matched_rule="net.block.default"
            if denied
            else ("net.allow.ai" if ai else "net.allow.default"),
            request_headers=f"host: {domain}\r\nuser-agent: capsem-guest/1.6\r\nauthorization: hash:{hex_id(self.rng)}",
            response_headers="content-type: application/json\r\nserver: envoy"
            if not denied
            else None,
            request_body_preview=request,
            response_body_preview=response,
            conn_type="https-mitm" if port == 443 else "http-mitm",
            policy_mode="enforce",
            policy_action="block" if denied else "allow",
            policy_rule="net.default",
            policy_reason="domain not on allowlist" if denied else None,
            trace_id=trace,
            turn_id=self.turn(trace),
            credential_ref=self.cred() if ai and port == 443 else None,
        )
        self.rule(
            "http.request", eid, "block" if denied else "allow", trace_id=trace, summary=domain
        )
        self.decision("http.request", eid, "block" if denied else "allow")
        if ai if capture is None else capture:
            self.blob("net_events", "http.request", eid, "request", (request or "").encode(), trace)
            self.blob(
                "net_events", "http.request", eid, "response", (response or "").encode(), trace
            )
        return rid, eid

    def fs(self, action: str, path: str, trace: str | None = None, size: int | None = None) -> int:
        eid = self.event_id()
        trace = trace or self.ambient
        directory, _, name = path.rpartition("/")
        rid = self.ledger.add(
            "fs_events",
            event_id=eid,
            timestamp=self.ts(),
            action=action,
            path=path,
            directory=directory or ".",
            name=name,
            size=None
            if action == "deleted"
            else (size if size is not None else self.rng.randint(80, 40_000)),
            trace_id=trace,
            turn_id=self.turn(trace),
            credential_ref=None,
        )
        self.tick(1, 30)
        return rid

    def exec_command(self, *, ask: bool = False) -> int | None:
        """An /exec command with its completion fields and the audit rows it caused."""
        if not self.era.host_events:
            return None
        command, exe, code = self.rng.choice(vocabulary.COMMANDS)
        self.exec_id += 1
        eid = self.event_id()
        trace = self.ambient
        duration = self.rng.randint(5, 4000)
        stdout = f"$ {command}\nok\n" if code == 0 else ""
        stderr = "" if code == 0 else f"{command.split()[0]}: error {code}\n"
        rid = self.ledger.add(
            "exec_events",
            event_id=eid,
            timestamp=self.ts(),
            exec_id=self.exec_id,
            command=command,
            exit_code=code,
            duration_ms=duration,
            stdout_preview=stdout,
            stderr_preview=stderr,
            stdout_bytes=len(stdout),
            stderr_bytes=len(stderr),
            source="api",
            trace_id=trace,
            turn_id=self.turn(trace),
            process_name="capsem-process",
            pid=self.pid,
            credential_ref=None,
            mcp_call_id=None,
        )
        if ask:
            self.ask(eid)
        else:
            self.rule("process.exec", eid, trace_id=trace, summary=command)
        self.tick(1, 10)
        self.audit(exe, command, exec_row=rid, code=code)
        self.tick(duration // 2, duration)
        return rid

    def audit(
        self,
        exe: str,
        argv: str,
        *,
        exec_row: int | None = None,
        code: int = 0,
        trace: str | None = None,
    ) -> int:
        eid = self.event_id()
        trace = trace or self.ambient
        pid = self.rng.randint(1000, 30000)
        rid = self.ledger.add(
            "audit_events",
            event_id=eid,
            timestamp=self.ts(),
            pid=pid,
            ppid=pid - self.rng.randint(1, 50),
            uid=0,
            exe=exe,
            comm=exe.rsplit("/", 1)[-1][:15],
            argv=argv,
            cwd="/root/project",
            exit_code=code,
            session_id=self.rng.randint(1, 9),
            tty=None,
            audit_id=f"{self.ms() // 1000}.{self.ms() % 1000:03d}:{self.rng.randint(100, 99999)}",
            exec_event_id=exec_row,
            parent_exe="/usr/bin/bash",
            trace_id=trace,
            turn_id=self.turn(trace),
            credential_ref=None,
        )
        self.rule("process.audit", eid, trace_id=trace, summary=argv)
        self.tick(1, 15)
        return rid

    def substitution(self, provider: str, outcome: str) -> None:
        if not self.era.security:
            return
        eid = self.event_id()
        self.ledger.add(
            "substitution_events",
            event_id=eid,
            timestamp=self.ts(),
            material_class="credential",
            source=f"http.header.{vocabulary.PROVIDERS[provider].key_header}",
            event_type="http.request",
            algorithm="blake3",
            substitution_ref=self.credential,
            outcome=outcome,
            provider=provider,
            confidence=None,
            trace_id=self.ambient,
            turn_id=self.turn(self.ambient),
            context_json=dumps(
                {
                    "header": vocabulary.PROVIDERS[provider].key_header,
                    "domain": vocabulary.PROVIDERS[provider].domain,
                }
            ),
        )
        self.rule("credential.substitution", eid, trace_id=self.ambient, summary=outcome)
        self.tick(1, 10)

    def ask(self, event_id: str | None) -> None:
        """A rule that asked, then a user approval: pending row, then approved row."""
        if not self.era.security or event_id is None:
            return
        self.rule("process.exec", event_id, "ask", rule_id="exec.ask.network-tools")
        self.decision("process.exec", event_id, "ask")
        ask_id = hex_id(self.rng)
        for status in ("pending", "approved"):
            self.ask_row(ask_id, event_id, status)
            self.tick(500, 8000)
        self.decision(
            "process.exec", event_id, "allow", stage="ask_resolution", actor="user", previous="ask"
        )

    def ask_row(self, ask_id: str, event_id: str, status: str) -> int:
        return self.ledger.add(
            "security_ask_events",
            timestamp_unix_ms=self.ms(),
            ask_id=ask_id,
            event_id=event_id,
            event_type="process.exec",
            rule_id="exec.ask.network-tools",
            rule_name="Ask before network tools",
            status=status,
            rule_json=dumps({"id": "exec.ask.network-tools", "action": "ask"}),
            event_json=dumps({"event_id": event_id}),
            resolver=None if status == "pending" else "user",
            reason=None if status == "pending" else "approved in UI",
            trace_id=None,
            turn_id=None,
        )

    def mcp_chatter(self, server: str) -> None:
        """initialize / tools/list: security rows with no primary row, which is expected."""
        for event_type in ("mcp.event", "mcp.tool_list"):
            self.rule(
                event_type, self.event_id(), rule_id=f"mcp.allow.{server}", trace_id=self.ambient
            )
            self.tick(1, 20)

    def mcp_call(self, server: str | None = None, *, error: bool = False) -> int:
        """An MCP tools/call seen on the wire: a tool_calls row (origin 'mcp', JSON-RPC id as
        call_id, no model_call_id) with its mcp.tool_call rule row and bodies; or, before
        06-24, an mcp_calls row."""
        server = server or self.rng.choice(sorted(vocabulary.MCP_SERVERS))
        tool = self.rng.choice(vocabulary.MCP_SERVERS[server])
        self.jsonrpc[server] = self.jsonrpc.get(server, 0) + 1
        rpc_id = str(self.jsonrpc[server])
        args = (
            {"path": self.rng.choice(vocabulary.FILES)}
            if server == "filesystem"
            else {"query": "capsem ledger"}
        )
        request = dumps(
            {
                "jsonrpc": "2.0",
                "id": int(rpc_id),
                "method": "tools/call",
                "params": {"name": tool, "arguments": args},
            }
        )
        result = {"content": [{"type": "text", "text": f"{tool} returned 3 results"}]}
        response = dumps(
            {
                "jsonrpc": "2.0",
                "id": int(rpc_id),
                ("error" if error else "result"): (
                    {"code": -32000, "message": "upstream timeout"} if error else result
                ),
            }
        )
        duration = self.rng.randint(10, 1500)
        # The call's columns shared by both eras' tables (mcp_calls, then tool_calls).
        call = dict(
            decision="error" if error else "allowed",
            duration_ms=duration,
            error_message="upstream timeout" if error else None,
            process_name="capsem-mcp-aggregator",
            bytes_sent=len(request),
            bytes_received=len(response),
            policy_mode="enforce",
            policy_action="allow",
            policy_rule="mcp.default",
            policy_reason=None,
            trace_id=self.ambient,
        )
        if not self.era.mcp_in_tool_calls:
            rid = self.ledger.add(
                "mcp_calls",
                timestamp=self.ts(),
                server_name=server,
                method="tools/call",
                tool_name=tool,
                request_id=rpc_id,
                request_preview=request,
                response_preview=response,
                **call,
            )
            self.tick(duration, duration + 50)
            return rid
        eid = self.event_id()
        rid = self.ledger.add(
            "tool_calls",
            event_id=eid,
            timestamp=self.ts(),
            model_call_id=None,
            provider="",
            status="error" if error else "responded",
            call_index=0,
            call_id=rpc_id,
            tool_name=tool,
            arguments=request,
            response_preview=response,
            origin="mcp",
            transport="vsock_frame",
            server_name=server,
            method="tools/call",
            request_id=rpc_id,
            **call,
            turn_id=self.turn(self.ambient),
            credential_ref=None,
        )
        self.rule(
            "mcp.tool_call", eid, rule_id=f"mcp.allow.{server}", trace_id=self.ambient, summary=tool
        )
        self.blob("tool_calls", "mcp.tool_call", eid, "request", request.encode(), self.ambient)
        self.blob("tool_calls", "mcp.tool_call", eid, "response", response.encode(), self.ambient)
        self.tick(duration, duration + 50)
        return rid

    def habits(self) -> dict[str, Any]:
        """The writer habits this builder produced (manifest ``habits``; see manifest.py)."""
        return {
            "gemini_reused_ids": sorted({k[1] for k, v in self.gemini_ids.items() if len(v) > 1}),
            "unpairable_tool_ids": {
                "tool_calls": list(self.unpairable_calls),
                "tool_responses": list(self.unpairable),
            },
            "ambient_trace": self.inherited_ambient + ([self.ambient] if self.era.ambient else []),
            "truncated_blobs": list(self.truncated),
            "provider_posts": list(self.provider_posts),
            "end_turn_tool_calls": list(self.end_turn_tools),
            "results_in_another_trace": list(self.results_in_another_trace),
        }

    def absorb(self, other: Builder) -> None:
        """Take over the habits of the builder that wrote the rows this one continues."""
        self.unpairable[:0] = other.unpairable
        self.unpairable_calls[:0] = other.unpairable_calls
        self.truncated[:0] = other.truncated
        self.provider_posts[:0] = other.provider_posts
        self.end_turn_tools[:0] = other.end_turn_tools
        self.results_in_another_trace[:0] = other.results_in_another_trace
        for call_id, calls in other.gemini_ids.items():
            self.gemini_ids.setdefault(call_id, set()).update(calls)
        if other.era.ambient and other.ambient != self.ambient:
            self.inherited_ambient.append(other.ambient)

    def provider_post(self, domain: str, path: str) -> int:
        """A POST to a model provider's domain that is not a model API call: an ordinary
        net_events row on the ambient trace (only the OAuth token exchange has its body
        captured, as a credential candidate)."""
        token = path == "/token"
        request = (
            "grant_type=refresh_token&refresh_token=hash:" + hex_id(self.rng) if token else None
        )
        response = (
            dumps({"access_token": "hash:" + hex_id(self.rng), "expires_in": 3599})
            if token
            else None
        )
        rid, _eid = self.net(
            domain,
            path,
            "allowed",
            200,
            method="POST",
            request=request,
            response=response,
            capture=token,
        )
        self.provider_posts.append(rid)
        self.tick(5, 200)
        return rid

    def upload(self) -> int:
        """A file upload to Gemini's /upload/ endpoint: not a model call; its captured body is
        over 10 MiB, so its request blob keeps the first 10 MiB only (truncated=1)."""
        domain, path = vocabulary.UPLOAD
        body, digest = upload_body()
        rid, eid = self.net(
            domain,
            path,
            "allowed",
            200,
            method="POST",
            capture=False,
            request_bytes=len(body) * 2 // 5,
            response='{"file":{"state":"ACTIVE"}}',
        )
        self.blob(
            "net_events",
            "http.request",
            eid,
            "request",
            body,
            self.ambient,
            "application/octet-stream",
            body_hash=digest,
        )
        self.blob(
            "net_events",
            "http.request",
            eid,
            "response",
            b'{"file":{"state":"ACTIVE"}}',
            self.ambient,
        )
        self.provider_posts.append(rid)
        self.tick(500, 4000)
        return rid

    def snapshot(self, slot: int, origin: str = "auto") -> None:
        if not self.era.snapshots:
            return
        fs_ids = [r["id"] for r in self.ledger.rows["fs_events"]]
        self.ledger.add(
            "snapshot_events",
            timestamp=self.t.strftime("%Y-%m-%dT%H:%M:%SZ"),
            slot=slot,
            origin=origin,
            name=None if origin == "auto" else "before-refactor",
            files_count=len(fs_ids),
            start_fs_event_id=fs_ids[0] if fs_ids else None,
            stop_fs_event_id=fs_ids[-1] if fs_ids else None,
            trace_id=self.ambient,
        )

    # -- agentic traces -----------------------------------------------------------------
    def tool_request(
        self, provider: vocabulary.Provider, name: str | None = None
    ) -> tuple[str, str, str]:
        """(tool_name, arguments JSON, result text) for one model-emitted tool call (of tool
        ``name`` if given)."""
        roll = 1.0 if name else self.rng.random()
        if roll < 0.1:
            name = self.rng.choice(vocabulary.LOCAL_TOOLS)
            return name, dumps({"limit": 50}), "12 timeline rows"
        if roll < 0.2:
            name = self.rng.choice(vocabulary.PROXY_TOOLS)
            return (
                name,
                dumps({"query": "is:open label:bug"}),
                '[{"number": 42, "title": "Parser drops unicode"}]',
            )
        name = name or self.rng.choice(provider.native_tools)
        path = self.rng.choice(vocabulary.FILES)
        if name in SHELL_TOOLS:
            command = self.rng.choice(vocabulary.COMMANDS)[0]
            return name, dumps({"command": command}), f"$ {command}\n3 passed in 0.41s"
        if name in WRITE_TOOLS:
            return (
                name,
                dumps(
                    {"file_path": path, "old_string": "return None", "new_string": "return result"}
                ),
                f"Updated {path}",
            )
        return name, dumps({"file_path": path}), f"   1\timport os\n   2\timport sys\n   ({path})"

    def call_ids(self, provider: vocabulary.Provider, name: str, position: int) -> tuple[str, str]:
        """(id the response gives a tool call, id the next request gives its result)."""
        if provider.name == "google":
            synth = f"gemini_{name}_{position}"
            mode = self.era.gemini_ids
            if mode == "bare":
                return name, name
            return (name, synth) if mode == "split" else (synth, synth)
        call_id = f"{provider.call_prefix}{hex_id(self.rng, 20)}"
        return call_id, call_id

    def pairable(self, provider: vocabulary.Provider) -> bool:
        """Whether this writer can match a tool result to the call that asked for it."""
        if provider.name == "ollama":
            return False
        return provider.name != "google" or self.era.gemini_ids != "split"

    def trace(
        self, provider_name: str, model: str, calls: int, *, interrupted: bool = False
    ) -> str:
        """One user turn: ``calls`` model exchanges forming an agentic loop.

        Every call but the last emits tool calls whose results ride on the next call; the last
        ends the turn (or, if ``interrupted``, emits tool calls that never get a response).
        The trace each call gets is the writer's (telemetry_hook.rs): a request whose tool
        results match registered calls joins their trace; otherwise a call that emits tool calls
        starts a UUID trace, and one that emits none takes the ambient trace (a new UUID before
        1.1). Ollama tool calls are never parsed, so every Ollama call is ambient. Returns the
        trace of the last call.
        """
        rng = self.rng
        provider = vocabulary.PROVIDERS[provider_name]
        path, api = api_path(provider, model)
        ollama = provider.name == "ollama"
        pairable = self.pairable(provider)
        messages: list[dict[str, Any]] = (
            [{"role": "system", "content": SYSTEM_PROMPT}] if ollama else []
        )
        messages.append({"role": "user", "content": rng.choice(vocabulary.PROMPTS)})
        loop: str | None = None
        carried: list[tuple[str, str, str, str]] = []
        trace = ""
        for index in range(calls):
            last = index == calls - 1
            emitted: list[tuple[str, str, str, str]] = []
            answers: list[tuple[str, str, str, str]] = []
            if not last or interrupted:
                for position in range(rng.randint(1, 2)):
                    # Gemini often calls the same tool again in the next step (reading file
                    # after file): then its synthesized id recurs (spec §4.3).
                    again = (
                        carried[0][1]
                        if position == 0
                        and carried
                        and provider.name == "google"
                        and carried[0][1] in provider.native_tools
                        and rng.random() < 0.7
                        else None
                    )
                    name, args, result = self.tool_request(provider, again)
                    call_id, answer_id = self.call_ids(provider, name, position)
                    emitted.append((call_id, name, args, result))
                    answers.append((answer_id, name, args, result))
            parsed = [] if ollama else emitted
            if ollama:  # every role=tool message of the history, by its index
                carried = [
                    (f"ollama_tool_result_{i}", "", "", m["content"])
                    for i, m in enumerate(messages)
                    if m["role"] == "tool"
                ]
            if carried and pairable and loop:
                trace = loop
            elif parsed:
                trace = new_uuid(rng)
            else:
                trace = self.ambient if self.era.ambient else new_uuid(rng)
            loop = trace if parsed else None
            self.model_exchange(
                provider, model, path, api, trace, messages, carried, parsed, index, pairable
            )
            for _call_id, name, args, _result in emitted:
                self.after_tool(name, args, trace)
            messages.append({"role": "assistant", "content": f"[{len(emitted)} tool calls]"})
            for call_id, _name, _args, result in emitted:
                messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
            carried = answers
            self.tick(200, 3000)
        return trace

    def plain_call(self, provider_name: str, model: str, prompt: str) -> int:
        """A single non-tool model call (a title, a quota probe, a plain question): it carries no
        tool results and emits no tool calls, so it takes the ambient trace (spec §4.4)."""
        provider = vocabulary.PROVIDERS[provider_name]
        path, api = api_path(provider, model)
        trace = self.ambient if self.era.ambient else new_uuid(self.rng)
        messages = [{"role": "user", "content": prompt}]
        return self.model_exchange(provider, model, path, api, trace, messages, [], [], 0, True)

    def model_exchange(
        self,
        provider: vocabulary.Provider,
        model: str,
        path: str,
        api: str,
        trace: str,
        messages: list[dict[str, Any]],
        carried: list[tuple[str, str, str, str]],
        emitted: list[tuple[str, str, str, str]],
        index: int,
        pairable: bool,
    ) -> int:
        """One provider request/response: net row, model call, its items, tool calls/responses."""
        rng = self.rng
        ollama = provider.name == "ollama"
        if ollama:
            request = dumps(
                {
                    "model": model,
                    "stream": False,
                    "messages": messages,
                    "tools": list(provider.native_tools),
                }
            )
        else:
            request = dumps(
                {
                    "model": model,
                    "max_tokens": 8192,
                    "stream": True,
                    "system": SYSTEM_PROMPT,
                    "messages": messages,
                    "tools": list(provider.native_tools),
                }
            )
        final = not emitted
        text = (
            "Done: the tests pass and the change is committed."
            if final
            else (f"Let me run {emitted[0][1]}." if rng.random() < 0.5 else None)
        )
        thinking = (
            "The user wants the failing test fixed; read it first." if rng.random() < 0.4 else None
        )
        message_id = None if provider.name in ("google", "ollama") else f"msg_{hex_id(rng, 24)}"
        # Only Anthropic and OpenAI chat completions mark tool turns; Gemini (STOP), the
        # Responses API and Ollama (done) say end_turn even with tool calls (spec §4.3).
        stop = "tool_use" if emitted and api in TOOL_STOP_APIS else "end_turn"
        inp = 1800 + 1400 * index + rng.randint(0, 900)
        out = rng.randint(40, 900)
        if ollama:
            response = dumps(
                {
                    "model": model,
                    "message": {"role": "assistant", "content": text or ""},
                    "done": True,
                    "done_reason": "stop",
                    "prompt_eval_count": inp,
                    "eval_count": out,
                }
            )
        else:
            response = dumps(
                {
                    "id": message_id,
                    "model": model,
                    "stop_reason": stop,
                    "content": [{"type": "text", "text": text}]
                    + [
                        {"type": "tool_use", "id": c, "name": n, "input": json.loads(a)}
                        for c, n, a, _ in emitted
                    ],
                }
            )
        cache = (
            rng.randint(0, inp * 3 // 4)
            if provider.name in ("anthropic", "openai") and index
            else 0
        )
        think = rng.randint(20, 400) if thinking and provider.name in ("openai", "google") else 0
        details = {k: v for k, v in (("cache_read", cache), ("thinking", think)) if v}
        duration = rng.randint(400, 9000)
        self.net(
            provider.domain,
            path,
            "allowed",
            200,
            method="POST",
            trace=trace,
            request=request,
            response=response,
            ai=True,
            port=provider.port,
        )
        self.tick(0, 1)
        eid = self.event_id()
        mc = self.ledger.add(
            "model_calls",
            event_id=eid,
            timestamp=self.ts(),
            provider=provider.name,
            protocol=provider.name,
            model=model,
            process_name=provider.process_name,
            pid=self.pid,
            method="POST",
            path=path,
            stream=0 if ollama else 1,
            system_prompt_preview=SYSTEM_PROMPT,
            messages_count=len(messages),
            tools_count=len(emitted) if self.era.items_and_blobs else len(provider.native_tools),
            request_bytes=len(request),
            request_body_preview=request,
            message_id=message_id,
            status_code=200,
            text_content=text,
            thinking_content=thinking,
            stop_reason=stop,
            input_tokens=inp,
            output_tokens=out,
            duration_ms=duration,
            response_bytes=len(response),
            estimated_cost_usd=cost_usd(provider.name, model, inp, out, cache),
            trace_id=trace,
            turn_id=self.turn(trace),
            usage_details=dumps(details) if details else None,
            credential_ref=None if ollama else self.cred(),
        )
        if emitted and stop == "end_turn":
            self.end_turn_tools.append(mc)
        if provider.name == "google" and self.era.gemini_ids == "synth":
            for call_id, *_rest in emitted:
                self.gemini_ids.setdefault((trace, call_id), set()).add(mc)
        self.rule("model.call", eid, trace_id=trace, summary=model)
        self.blob("model_calls", "model.call", eid, "request", request.encode(), trace)
        self.blob("model_calls", "model.call", eid, "response", response.encode(), trace)
        self.items(
            mc,
            provider,
            model,
            path,
            trace,
            request if not carried else None,
            thinking,
            text,
            emitted,
            carried,
        )
        first_call = self.ledger.next_id("tool_calls")
        responses = self.tool_rows(mc, provider, trace, emitted, carried, duration)
        if not pairable:
            self.unpairable += responses
            self.unpairable_calls += range(first_call, self.ledger.next_id("tool_calls"))
        self.tick(1, 50)
        return mc

    def items(
        self,
        mc: int,
        provider: vocabulary.Provider,
        model: str,
        path: str,
        trace: str,
        request: str | None,
        thinking: str | None,
        text: str | None,
        emitted: list,
        carried: list,
    ) -> None:
        """model_items in writer order: request, reasoning, response, tool_call*, tool_response*."""
        if not self.era.items_and_blobs:
            return
        entries: list[tuple[str, str, Any, Any, Any]] = []
        if request is not None:
            entries.append(("request", "", None, None, request))
        if thinking:
            entries.append(("reasoning", "", None, None, thinking))
        if text:
            entries.append(("response", "", None, None, text))
        entries += [("tool_call", c, n, a, a) for c, n, a, _ in emitted]
        entries += [("tool_response", c, None, None, r) for c, _n, _a, r in carried]
        ts = self.ts()
        for index, (kind, call_id, name, args, content) in enumerate(entries, start=1):
            content_hash = item_hash(kind, call_id, name, args, content)
            key = (trace, kind, content_hash, call_id)
            if key in self.item_keys:
                continue  # the writer dedups after numbering, so item_index keeps a gap
            self.item_keys.add(key)
            self.ledger.add(
                "model_items",
                event_id=self.event_id(),
                model_call_id=mc,
                timestamp=ts,
                provider=provider.name,
                model=model,
                path=path,
                trace_id=trace,
                turn_id=self.turn(trace),
                kind=kind,
                item_index=index,
                call_id=call_id,
                tool_name=name,
                arguments=args,
                content=content,
                content_hash=content_hash,
                credential_ref=None,
            )

    def tool_rows(
        self,
        mc: int,
        provider: vocabulary.Provider,
        trace: str,
        emitted: list,
        carried: list,
        duration: int,
    ) -> list[int]:
        """tool_calls for what this call emitted, tool_responses for what it carried; returns
        the tool_responses row ids."""
        for position, (call_id, name, args, _result) in enumerate(emitted):
            origin = (
                "local"
                if name in vocabulary.LOCAL_TOOLS
                else ("mcp_proxy" if "__" in name else "native")
            )
            self.ledger.add(
                "tool_calls",
                event_id=self.event_id(),
                timestamp=self.ts(),
                model_call_id=mc,
                provider=provider.name,
                status="observed",
                call_index=position,
                call_id=call_id,
                tool_name=name,
                arguments=args,
                response_preview=None,
                origin=origin,
                transport="sse",
                server_name="model",
                method=None,
                request_id=None,
                decision="allowed",
                duration_ms=duration,
                error_message=None,
                process_name=provider.process_name,
                bytes_sent=0,
                bytes_received=0,
                policy_mode=None,
                policy_action=None,
                policy_rule=None,
                policy_reason=None,
                trace_id=trace,
                turn_id=self.turn(trace),
                credential_ref=None,
                mcp_call_id=None,
            )
        return [
            self.ledger.add(
                "tool_responses",
                model_call_id=mc,
                call_id=call_id,
                content_preview=result,
                is_error=0,
                trace_id=trace,
                turn_id=self.turn(trace),
                credential_ref=None,
            )
            for call_id, _name, _args, result in carried
        ]

    def after_tool(self, name: str, args: str, trace: str) -> None:
        """What the guest did because of a tool call: file writes and process execs."""
        parsed = json.loads(args)
        if name in WRITE_TOOLS and "file_path" in parsed:
            self.fs("modified", parsed["file_path"], trace)
        elif name in SHELL_TOOLS and self.era.host_events:
            command = parsed.get("command", "sh")
            exe = "/usr/bin/" + command.split()[0]
            self.audit(exe, command, trace=trace)


@dataclass(frozen=True)
class SessionShape:
    """How much and what kind of content one session gets."""

    traces: int = 3
    calls: int = 3
    providers: tuple[str, ...] = ("anthropic",)
    interrupted: bool = False  # last trace ends with unanswered tool calls
    mcp: bool = True
    ask: bool = True
    min_rows: int = 0  # keep adding traces until the session holds at least this many rows
    plain: bool = True  # one non-tool model call (a title) on the ambient trace
    posts: bool = True  # non-model POSTs to the providers' domains (OAuth, telemetry)
    upload: bool = False  # a file upload over 10 MiB: a truncated=1 body blob
    openai_chat: bool = False  # OpenAI traces use gpt-4.1 through chat completions


@functools.cache
def upload_body() -> tuple[bytes, str]:
    """A binary upload as the proxy captures it (lossy UTF-8: invalid bytes become U+FFFD, which
    inflates it past 10 MiB) and blake3 of all of it."""
    raw = b"\x89PNG\r\n\x1a\n" + bytes(range(128, 256)) * 36_000
    body = raw.decode("utf-8", "replace").encode()
    return body, blake3_ref(body)


def build_session(
    rng: random.Random,
    era: str,
    start: datetime,
    shape: SessionShape,
    ledger: Ledger | None = None,
    ambient: str | None = None,
) -> Builder:
    """All rows of one session of ``era``: start-up events, traces, host activity."""
    b = Builder(rng, era, start, ledger, ambient)
    for provider in shape.providers:
        b.dns(vocabulary.PROVIDERS[provider].domain)
        if provider in vocabulary.PRICED:
            b.substitution(provider, "captured")
        if shape.posts:
            for domain, path in vocabulary.PROVIDER_POSTS.get(provider, ()):
                b.provider_post(domain, path)
    if shape.upload:
        b.upload()
    if shape.mcp and b.era.mcp_in_tool_calls:
        b.mcp_chatter("github")
    number = 0
    while number < shape.traces or b.ledger.count() < shape.min_rows:
        provider = shape.providers[number % len(shape.providers)]
        model = rng.choice(sorted(vocabulary.PROVIDERS[provider].models))
        if provider == "openai" and shape.openai_chat:
            model = "gpt-4.1"
        interrupted = shape.interrupted and number == shape.traces - 1
        if provider in vocabulary.PRICED:
            b.substitution(provider, "injected")
        b.trace(provider, model, shape.calls, interrupted=interrupted)
        if number == 0 and shape.plain:
            b.plain_call(provider, min(vocabulary.PROVIDERS[provider].models), TITLE_PROMPT)
        if shape.mcp:
            b.mcp_call()
        domain, path, decision, status = rng.choice(vocabulary.OTHER_DOMAINS)
        b.dns(domain, decision)
        b.net(domain, path, decision, status)
        b.exec_command(ask=shape.ask and number == 0 and b.era.security)
        b.fs(rng.choice(("created", "modified", "deleted")), rng.choice(vocabulary.FILES))
        if number == 0:
            b.snapshot(0)
        number += 1
    return b
