"""A trace as OTLP JSON, so the same file loads into Jaeger, Langfuse or Phoenix.

Spans carry both vocabularies: OpenTelemetry's GenAI semantic conventions (`gen_ai.*`, read by
Langfuse and Jaeger) and OpenInference (`openinference.span.kind`, `llm.*`, `tool.*`, read by
Phoenix). Capsem's own keys ride along as `capsem.*`. Layout: one root span for the turn, a
child per model call, a grandchild per tool call it emitted (lasting until the model call that
consumed the response), and a child per host row (HTTP, DNS, file, exec, audit, credential).
Security rows become span events on the row they judged (joined by event_id).

OTLP/JSON encodes trace and span ids as hex and 64-bit integers as strings.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from datasette_capsem.graph.exchanges import ambient_rest, is_ambient, split_exchanges
from datasette_capsem.graph.timeparse import parse_ns, sane_ns
from datasette_capsem.graph.trace_rows import SPLIT_PATHS, TraceRows
from datasette_capsem.graph.values import as_float, as_int, text, usable_event_id
from datasette_capsem.ledger.tables import TABLES, Span

SCOPE = {"name": "datasette-capsem", "version": "0.1.0"}
SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3
STATUS_OK, STATUS_ERROR = 1, 2
VALUE_CHARS = 4000
HEX32 = re.compile(r"^[0-9a-f]{32}$")

# Host rows exported as spans (name prefix, OpenInference kind, attributes), from the registry.
HOST_SPANS: dict[str, Span] = {table.name: table.span for table in TABLES if table.span}


def otlp_trace_id(trace_id: str) -> str:
    """32 hex chars: the UUID itself when Capsem's trace id is one, else a stable hash."""
    compact = trace_id.replace("-", "").lower()
    if HEX32.match(compact):
        return compact
    return hashlib.sha256(trace_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def span_id(*parts: Any) -> str:
    """16 hex chars, stable for its parts. The exporter passes the OTLP trace id first: row
    ids repeat across sessions (every ledger has a model call 1), and trace stores such as
    Phoenix key spans by span id alone (`UNIQUE (span_id)`, a repeat silently dropped), so a
    span id must be unique across traces, not only within one."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        # OTLP/JSON has no NaN or Infinity a browser can parse: an unusable number is empty.
        return {"doubleValue": value} if math.isfinite(value) else {}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {
        "stringValue": text(value, VALUE_CHARS)
        if not isinstance(value, str)
        else value[:VALUE_CHARS]
    }


def attributes(pairs: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP key/value list; None values (and NaN or infinite floats) are left out."""
    return [
        {"key": key, "value": _value(value)}
        for key, value in pairs.items()
        if value is not None and not (isinstance(value, float) and not math.isfinite(value))
    ]


def row_start_ns(row: dict[str, Any]) -> int | None:
    """A row's start in exact nanoseconds (security tables hold integer milliseconds)."""
    if "timestamp_unix_ms" in row:
        millis = as_int(row.get("timestamp_unix_ms"))
        return None if millis is None else sane_ns(millis * 1_000_000)
    return parse_ns(row.get("timestamp") if "timestamp" in row else row.get("created_at"))


def _times(row: dict[str, Any], duration_column: str | None) -> tuple[int | None, int | None]:
    start = row_start_ns(row)
    duration = as_float(row.get(duration_column)) if duration_column else None
    end = start + int(round(max(duration or 0.0, 0.0) * 1_000_000)) if start is not None else None
    return start, end


class OtlpExporter:
    """Builds the spans of one trace."""

    def __init__(
        self, rows: TraceRows, session_id: str, root: str = "capsem.turn", scope: str | None = None
    ):
        self.rows = rows
        self.session_id = session_id
        self.scope = scope
        # An exchange of the ambient trace is a trace of its own in the exported data.
        key = rows.trace_id if rows.exchange is None else f"{rows.trace_id}:{rows.exchange}"
        self.trace_hex = self.otlp_trace(key)
        self.root_id = self.span_id("trace")
        self.root_name = root
        self.spans: list[dict[str, Any]] = []
        self.events = self._security_events()
        self.consumed_at = self._consumption_times()

    def otlp_trace(self, key: str) -> str:
        """The OTLP trace id of a Capsem trace (key) in this export: `otlp_trace_id`, or with a
        `scope` (a session id) one of that session's own, for a session that carries another
        session's trace ids without being its fork (push/pusher.py)."""
        return otlp_trace_id(key if self.scope is None else f"{self.scope}\x1f{key}")

    def span_id(self, *parts: Any) -> str:
        """A span id unique across traces: the same row in a forked session's copy of a
        trace keeps its id, the same row id in another trace gets another."""
        return span_id(self.trace_hex, *parts)

    def export(self) -> dict[str, Any]:
        self._model_spans()
        self._host_spans()
        self._mcp_tool_spans()
        self.spans.insert(0, self._root_span())
        resource = attributes(
            {
                "service.name": "capsem",
                "capsem.session.id": self.session_id,
                "session.id": self.session_id,
            }
        )
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": resource},
                    "scopeSpans": [{"scope": SCOPE, "spans": self.spans}],
                }
            ]
        }

    # -- building blocks ------------------------------------------------------------------

    def _span(
        self,
        sid: str,
        parent: str | None,
        name: str,
        times: tuple[int | None, int | None],
        attrs: dict[str, Any],
        *,
        kind: int = SPAN_KIND_INTERNAL,
        error: str | None = None,
        event_id: Any = None,
    ) -> dict[str, Any]:
        start, end = times
        span = {
            "traceId": self.trace_hex,
            "spanId": sid,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": str(start or 0),
            "endTimeUnixNano": str((end if end is not None else start) or 0),
            "attributes": attributes(attrs),
            "status": {"code": STATUS_ERROR, "message": error} if error else {"code": STATUS_OK},
        }
        if parent:
            span["parentSpanId"] = parent
        if usable_event_id(event_id) and self.events.get(event_id):
            span["events"] = self.events[event_id]
        self.spans.append(span)
        return span

    def _security_events(self) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for table, rows in self.rows.security.items():
            name = table.removesuffix("_events").replace("_", ".")
            for row in rows:
                outcome = (
                    row.get("rule_action") or row.get("effective_decision") or row.get("status")
                )
                event = {
                    "timeUnixNano": str(row_start_ns(row) or 0),
                    "name": name,
                    "attributes": attributes(
                        {
                            "capsem.table": table,
                            "capsem.row_id": row.get("id"),
                            "capsem.event_type": row.get("event_type"),
                            "capsem.rule_id": row.get("rule_id"),
                            "capsem.outcome": outcome,
                            "capsem.detection_level": row.get("detection_level"),
                        }
                    ),
                }
                found.setdefault(row.get("event_id"), []).append(event)
        return found

    def _consumption_times(self) -> dict[tuple[Any, Any], int]:
        """(call_id, trace) -> start of the model call that carried the tool's response."""
        starts = {r["id"]: row_start_ns(r) for r in self.rows.model_calls}
        found = {}
        for response in self.rows.tool_responses:
            start = starts.get(response.get("model_call_id"))
            if start is not None:
                found[(response.get("call_id"), response.get("trace_id"))] = start
        return found

    # -- spans ----------------------------------------------------------------------------

    def _root_span(self) -> dict[str, Any]:
        starts = [s["startTimeUnixNano"] for s in self.spans]
        ends = [s["endTimeUnixNano"] for s in self.spans]
        first = min((int(s) for s in starts if int(s)), default=0)
        last = max((int(e) for e in ends), default=first)
        calls = self.rows.model_calls
        tokens_in = sum(as_int(c.get("input_tokens")) or 0 for c in calls)
        tokens_out = sum(as_int(c.get("output_tokens")) or 0 for c in calls)
        span = {
            "traceId": self.trace_hex,
            "spanId": self.root_id,
            "name": self.root_name,
            "kind": SPAN_KIND_INTERNAL,
            "startTimeUnixNano": str(first),
            "endTimeUnixNano": str(last),
            "attributes": attributes(
                {
                    "openinference.span.kind": "AGENT",
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.conversation.id": self.rows.trace_id,
                    "session.id": self.session_id,
                    "capsem.trace_id": self.rows.trace_id,
                    "capsem.exchange.model_call_id": self.rows.exchange,
                    "capsem.ambient": is_ambient(self.rows.trace_id),
                    "capsem.model_calls": len(calls),
                    "gen_ai.usage.input_tokens": tokens_in,
                    "gen_ai.usage.output_tokens": tokens_out,
                    "llm.token_count.prompt": tokens_in,
                    "llm.token_count.completion": tokens_out,
                    "llm.token_count.total": tokens_in + tokens_out,
                }
            ),
            "status": {"code": STATUS_OK},
        }
        continued = self._continued_turns()
        if continued:  # the writer split this turn from another trace (spec §4.4)
            span["attributes"] += attributes({"capsem.continues_trace_id": continued[0][0]})
            span["links"] = [
                {
                    "traceId": self.otlp_trace(trace),
                    "spanId": span_id(self.otlp_trace(trace), "tool_calls", call_row),
                    "attributes": attributes({"capsem.link": why}),
                }
                for trace, call_row, why in continued
            ]
        return span

    def _continued_turns(self) -> list[tuple[str, Any, str]]:
        """(trace, tool call row, why) of the calls in other traces this trace's results
        answer, where the writer split one user turn (retry, resume, Gemini CLI ids)."""
        found = []
        for pair in self.rows.paired_elsewhere.values():
            why = SPLIT_PATHS.get(pair["writer_path"])
            if why and pair.get("call_trace_id") not in (None, self.rows.trace_id):
                found.append((str(pair["call_trace_id"]), pair["call_row"], why))
        return sorted(set(found), key=str)

    def _model_spans(self) -> None:
        for call in self.rows.model_calls:
            sid = self.span_id("model_calls", call["id"])
            self._model_span(call, sid)
            for tool in self.rows.tool_calls:
                if tool.get("model_call_id") == call["id"]:
                    self._tool_span(tool, sid)

    def _model_span(self, call: dict[str, Any], sid: str) -> None:
        provider, model = call.get("provider"), call.get("model")
        inp, out = as_int(call.get("input_tokens")), as_int(call.get("output_tokens"))
        status = as_int(call.get("status_code"))
        stop = call.get("stop_reason")
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": provider,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.response.id": call.get("message_id"),
            "gen_ai.response.finish_reasons": [stop] if stop else None,
            "gen_ai.usage.input_tokens": inp,
            "gen_ai.usage.output_tokens": out,
            "openinference.span.kind": "LLM",
            "llm.system": provider,
            "llm.provider": provider,
            "llm.model_name": model,
            "llm.token_count.prompt": inp,
            "llm.token_count.completion": out,
            "llm.token_count.total": (inp or 0) + (out or 0)
            if inp is not None or out is not None
            else None,
            "llm.cost.total": as_float(call.get("estimated_cost_usd")),
            "output.value": call.get("text_content"),
            "http.request.method": call.get("method"),
            "url.path": call.get("path"),
            "http.response.status_code": status,
            "capsem.table": "model_calls",
            "capsem.row_id": call["id"],
            "capsem.event_id": call.get("event_id"),
            "capsem.estimated_cost_usd": as_float(call.get("estimated_cost_usd")),
            "capsem.usage_details": call.get("usage_details"),
        }
        error = f"HTTP {status}" if status is not None and status >= 400 else None
        self._span(
            sid,
            self.root_id,
            f"chat {text(model or provider, 80)}",
            _times(call, "duration_ms"),
            attrs,
            kind=SPAN_KIND_CLIENT,
            error=error,
            event_id=call.get("event_id"),
        )

    def _tool_span(self, tool: dict[str, Any], parent: str | None) -> None:
        start, end = _times(tool, "duration_ms")
        consumed = self.consumed_at.get((tool.get("call_id"), tool.get("trace_id")))
        if start is not None and consumed is not None and consumed > start:
            end = consumed
        name = tool.get("tool_name")
        decision = tool.get("decision")
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": tool.get("call_id"),
            "gen_ai.tool.type": tool.get("origin"),
            "openinference.span.kind": "TOOL",
            "tool.name": name,
            "tool.parameters": tool.get("arguments"),
            "input.value": tool.get("arguments"),
            "capsem.table": "tool_calls",
            "capsem.row_id": tool["id"],
            "capsem.event_id": tool.get("event_id"),
            "capsem.origin": tool.get("origin"),
            "capsem.decision": decision,
        }
        failed = tool.get("status") == "error" or decision in ("denied", "error")
        self._span(
            self.span_id("tool_calls", tool["id"]),
            parent,
            f"execute_tool {text(name, 80)}",
            (start, end),
            attrs,
            error=text(tool.get("error_message") or decision, 200) if failed else None,
            event_id=tool.get("event_id"),
        )

    def _mcp_tool_spans(self) -> None:
        """Tool calls no model call emitted (MCP calls seen on the wire) hang off the root."""
        in_trace = {c["id"] for c in self.rows.model_calls}
        for tool in self.rows.tool_calls:
            if tool.get("model_call_id") not in in_trace:
                self._tool_span(tool, self.root_id)

    def _host_spans(self) -> None:
        for table, rows in self.rows.other.items():
            spec = HOST_SPANS[table]
            for row in rows:
                self._span(
                    self.span_id(table, row["id"]),
                    self.root_id,
                    f"{spec.prefix} {_host_name(spec, row)}",
                    _times(row, spec.duration),
                    {
                        "openinference.span.kind": spec.kind,
                        **_host_attributes(spec, row),
                        "capsem.table": table,
                        "capsem.row_id": row["id"],
                        "capsem.event_id": row.get("event_id"),
                    },
                    kind=SPAN_KIND_CLIENT if spec.client else SPAN_KIND_INTERNAL,
                    error=_host_error(spec, row),
                    event_id=row.get("event_id"),
                )


def _host_name(spec: Span, row: dict[str, Any]) -> str:
    fields = spec.name_fields
    return " ".join(text(row.get(f), 60) for f in fields if row.get(f) is not None)


def _host_attributes(spec: Span, row: dict[str, Any]) -> dict[str, Any]:
    found = {}
    for key, column in spec.attributes:
        name, _, cast = column.partition(":")
        found[key] = as_int(row.get(name)) if cast == "int" else row.get(name)
    return found


def _host_error(spec: Span, row: dict[str, Any]) -> str | None:
    decision = row.get("decision")
    if decision in ("denied", "error"):
        return f"decision {decision}"
    status = as_int(row.get("status_code"))
    if status is not None and status >= 400:
        return f"HTTP {status}"
    code = as_int(row.get("exit_code")) if spec.exit_code_error else None
    if code:
        return f"exit {code}"
    return None


def export_trace(rows: TraceRows, session_id: str, scope: str | None = None) -> dict[str, Any]:
    """OTLP JSON (`resourceSpans`) of one trace. The ambient trace is not a turn (spec §4.4):
    each of its model calls is exported as a trace of its own (root `capsem.exchange`), and
    its other rows as one `capsem.ambient` trace. `scope`: see `OtlpExporter.otlp_trace`."""
    if rows.exchange is not None:
        return OtlpExporter(rows, session_id, root="capsem.exchange", scope=scope).export()
    if not is_ambient(rows.trace_id):
        return OtlpExporter(rows, session_id, scope=scope).export()
    documents = [
        OtlpExporter(exchange, session_id, root="capsem.exchange", scope=scope).export()
        for exchange in split_exchanges(rows)
    ]
    rest = ambient_rest(rows)
    if not rest.empty:
        documents.append(
            OtlpExporter(rest, session_id, root="capsem.ambient", scope=scope).export()
        )
    return merge(documents)


def merge(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """Several exported traces as one OTLP document."""
    return {"resourceSpans": [rs for doc in documents for rs in doc["resourceSpans"]]}
