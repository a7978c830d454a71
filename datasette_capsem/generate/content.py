"""Realistic ledger content: agentic traces and the host events around them (spec §4).

One ``Builder`` writes the rows of one session into a ``Ledger``. The same builder serves every
schema era; ``EraTraits`` says which kinds of rows the era had, and columns an era lacks are
dropped at insert time.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import blake3

from datasette_capsem.generate import catalog
from datasette_capsem.generate.ledger import Ledger

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
SYSTEM_PROMPT = "You are a coding agent running inside a Capsem sandbox. Work in /root/project."


@dataclass(frozen=True)
class EraTraits:
    """What kinds of rows a schema era recorded (spec §4.5)."""

    name: str
    event_ids: bool  # event_id columns exist (06-06 on)
    turn_ids: bool  # turn_id written (06-24 on)
    items_and_blobs: bool  # model_items and event_body_blobs (06-14/06-15 on)
    security: bool  # security_* and substitution_events (06-06 on)
    host_events: bool  # dns_events, exec_events, audit_events
    mcp_in_tool_calls: bool  # MCP calls are tool_calls rows (else mcp_calls)
    nano: bool  # 9 fractional digits in timestamps (before 06-11)
    snapshots: bool  # snapshot_events rows


TRAITS: dict[str, EraTraits] = {
    "current": EraTraits("current", True, True, True, True, True, True, False, False),
    "march2026": EraTraits("march2026", False, False, False, False, False, False, True, True),
    "v1_1": EraTraits("v1_1", False, False, False, False, True, False, True, True),
    # Rows a 1.2 writer put in a file that was later migrated (see session_migrated.sql).
    "v1_2": EraTraits("v1_2", False, False, False, False, True, False, True, False),
}

SHELL_TOOLS = {"Bash", "shell", "run_shell_command", "bash"}
WRITE_TOOLS = {"Edit", "Write", "apply_patch", "write_file", "replace", "edit"}


def new_uuid(rng: random.Random) -> str:
    """A UUID v4 drawn from ``rng`` (reproducible, unlike uuid.uuid4)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def hex_id(rng: random.Random, digits: int = 12) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


def blake3_ref(data: bytes | str) -> str:
    """``blake3:<64 hex>`` of ``data``, the format of every *_hash column."""
    raw = data.encode() if isinstance(data, str) else data
    return "blake3:" + blake3.blake3(raw).hexdigest()


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
    prices = catalog.PROVIDERS[provider].models.get(model or "")
    if provider not in catalog.PRICED or not prices or inp is None or out is None:
        return 0.0
    return (max(inp - cache, 0) * prices[0] + out * prices[1]) / 1e6


class Builder:
    """Appends one session's rows to a ledger, advancing a private clock."""

    def __init__(
        self,
        rng: random.Random,
        era: str,
        start: datetime,
        ledger: Ledger | None = None,
    ) -> None:
        self.rng = rng
        self.era = TRAITS[era]
        self.t = start
        self.ledger = ledger or Ledger()
        self.ambient = new_uuid(rng)
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
            previous_decision=extra.get("previous"),
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
    ) -> None:
        """An event_body_blobs row whose hash really is the blake3 of its body."""
        if not self.era.items_and_blobs or event_id is None:
            return
        self.ledger.add(
            "event_body_blobs",
            event_id=event_id,
            event_type=event_type,
            source_table=source,
            direction=direction,
            content_type=content_type,
            original_bytes=len(body),
            stored_bytes=len(body),
            truncated=0,
            body_hash=blake3_ref(body),
            body=body,
            trace_id=trace,
            turn_id=self.turn(trace),
            created_at=self.ts(),
        )

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
    ) -> tuple[int, str | None]:
        """One net_events row (plus its rule, decision and, for AI traffic, body blobs)."""
        eid = self.event_id()
        trace = trace or self.ambient
        denied = decision == "denied"
        req_bytes = len(request or "") + self.rng.randint(200, 600)
        resp_bytes = len(response or "") + self.rng.randint(100, 400)
        rid = self.ledger.add(
            "net_events",
            event_id=eid,
            timestamp=self.ts(),
            domain=domain,
            port=443,
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
            conn_type="https-mitm",
            policy_mode="enforce",
            policy_action="block" if denied else "allow",
            policy_rule="net.default",
            policy_reason="domain not on allowlist" if denied else None,
            trace_id=trace,
            turn_id=self.turn(trace),
            credential_ref=self.cred() if ai else None,
        )
        self.rule(
            "http.request", eid, "block" if denied else "allow", trace_id=trace, summary=domain
        )
        self.decision("http.request", eid, "block" if denied else "allow")
        if ai:
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
        command, exe, code = self.rng.choice(catalog.COMMANDS)
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
            source="http_header",
            event_type="http.request",
            algorithm="blake3",
            substitution_ref=self.credential,
            outcome=outcome,
            provider=provider,
            confidence="high",
            trace_id=self.ambient,
            turn_id=self.turn(self.ambient),
            context_json=dumps(
                {"header": "authorization", "domain": catalog.PROVIDERS[provider].domain}
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
        server = server or self.rng.choice(sorted(catalog.MCP_SERVERS))
        tool = self.rng.choice(catalog.MCP_SERVERS[server])
        self.jsonrpc[server] = self.jsonrpc.get(server, 0) + 1
        rpc_id = str(self.jsonrpc[server])
        args = (
            {"path": self.rng.choice(catalog.FILES)}
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
    def tool_request(self, provider: catalog.Provider) -> tuple[str, str, str]:
        """(tool_name, arguments JSON, result text) for one model-emitted tool call."""
        roll = self.rng.random()
        if roll < 0.1:
            name = self.rng.choice(catalog.LOCAL_TOOLS)
            return name, dumps({"limit": 50}), "12 timeline rows"
        if roll < 0.2:
            name = self.rng.choice(catalog.PROXY_TOOLS)
            return (
                name,
                dumps({"query": "is:open label:bug"}),
                '[{"number": 42, "title": "Parser drops unicode"}]',
            )
        name = self.rng.choice(provider.native_tools)
        path = self.rng.choice(catalog.FILES)
        if name in SHELL_TOOLS:
            command = self.rng.choice(catalog.COMMANDS)[0]
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

    def trace(
        self, provider_name: str, model: str, calls: int, *, interrupted: bool = False
    ) -> str:
        """One user turn: ``calls`` model exchanges forming an agentic loop.

        Every call but the last emits tool calls whose results ride on the next call; the last
        ends the turn (or, if ``interrupted``, emits tool calls that never get a response).
        """
        provider = catalog.PROVIDERS[provider_name]
        trace = new_uuid(self.rng)
        prompt = self.rng.choice(catalog.PROMPTS)
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        pending: list[tuple[str, str, str, str]] = []
        for index in range(calls):
            last = index == calls - 1
            emitted = []
            if not last or interrupted:
                for _ in range(self.rng.randint(1, 2)):
                    name, args, result = self.tool_request(provider)
                    emitted.append(
                        (f"{provider.call_prefix}{hex_id(self.rng, 20)}", name, args, result)
                    )
            self.model_exchange(provider, model, trace, messages, pending, emitted, index)
            messages.append({"role": "assistant", "content": f"[{len(emitted)} tool calls]"})
            for call_id, _name, _args, result in emitted:
                messages.append({"role": "tool", "tool_call_id": call_id, "content": result[:80]})
            pending = emitted
            self.tick(200, 3000)
        return trace

    def model_exchange(
        self,
        provider: catalog.Provider,
        model: str,
        trace: str,
        messages: list[dict[str, Any]],
        carried: list[tuple[str, str, str, str]],
        emitted: list[tuple[str, str, str, str]],
        index: int,
    ) -> int:
        """One provider request/response: net row, model call, its items, tool calls/responses."""
        rng = self.rng
        path = provider.path.format(model=model)
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
        message_id = None if provider.name == "google" else f"msg_{hex_id(rng, 24)}"
        response = dumps(
            {
                "id": message_id,
                "model": model,
                "stop_reason": "end_turn" if final else "tool_use",
                "content": [{"type": "text", "text": text}]
                + [
                    {"type": "tool_use", "id": c, "name": n, "input": json.loads(a)}
                    for c, n, a, _ in emitted
                ],
            }
        )
        inp = 1800 + 1400 * index + rng.randint(0, 900)
        out = rng.randint(40, 900)
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
            stream=1,
            system_prompt_preview=SYSTEM_PROMPT,
            messages_count=len(messages),
            tools_count=len(emitted) if self.era.items_and_blobs else len(provider.native_tools),
            request_bytes=len(request),
            request_body_preview=request,
            message_id=message_id,
            status_code=200,
            text_content=text,
            thinking_content=thinking,
            stop_reason="end_turn" if final else "tool_use",
            input_tokens=inp,
            output_tokens=out,
            duration_ms=duration,
            response_bytes=len(response),
            estimated_cost_usd=cost_usd(provider.name, model, inp, out, cache),
            trace_id=trace,
            turn_id=self.turn(trace),
            usage_details=dumps(details) if details else None,
            credential_ref=self.cred(),
        )
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
        self.tool_rows(mc, provider, trace, emitted, carried, duration)
        self.tick(1, 50)
        return mc

    def items(
        self,
        mc: int,
        provider: catalog.Provider,
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
        entries += [("tool_response", c, n, None, r) for c, n, _, r in carried]
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
        provider: catalog.Provider,
        trace: str,
        emitted: list,
        carried: list,
        duration: int,
    ) -> None:
        """tool_calls for what this call emitted, tool_responses for what it carried."""
        for position, (call_id, name, args, _result) in enumerate(emitted):
            origin = (
                "local"
                if name in catalog.LOCAL_TOOLS
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
            self.after_tool(name, args, trace)
        for call_id, _name, _args, result in carried:
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


def build_session(
    rng: random.Random, era: str, start: datetime, shape: SessionShape, ledger: Ledger | None = None
) -> Builder:
    """All rows of one session of ``era``: start-up events, traces, host activity."""
    b = Builder(rng, era, start, ledger)
    for provider in shape.providers:
        b.dns(catalog.PROVIDERS[provider].domain)
        if provider in catalog.PRICED:
            b.substitution(provider, "captured")
    if shape.mcp and b.era.mcp_in_tool_calls:
        b.mcp_chatter("github")
    number = 0
    while number < shape.traces or b.ledger.count() < shape.min_rows:
        provider = shape.providers[number % len(shape.providers)]
        model = rng.choice(sorted(catalog.PROVIDERS[provider].models))
        interrupted = shape.interrupted and number == shape.traces - 1
        if provider in catalog.PRICED:
            b.substitution(provider, "injected")
        b.trace(provider, model, shape.calls, interrupted=interrupted)
        if shape.mcp:
            b.mcp_call()
        domain, path, decision, status = rng.choice(catalog.OTHER_DOMAINS)
        b.dns(domain, decision)
        b.net(domain, path, decision, status)
        b.exec_command(ask=shape.ask and number == 0 and b.era.security)
        b.fs(rng.choice(("created", "modified", "deleted")), rng.choice(catalog.FILES))
        if number == 0:
            b.snapshot(0)
        number += 1
    return b
