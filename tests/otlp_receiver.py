"""A minimal, real OTLP/HTTP trace receiver for tests: http.server in a thread on 127.0.0.1.

It decodes what it receives as a collector would (protobuf with opentelemetry-proto's
ExportTraceServiceRequest, or OTLP/JSON), answers with an ExportTraceServiceResponse, and keeps
every span it accepted. `fail_after(k, n, status)` makes the n requests after the k-th fail
with `status` (503, 429 with Retry-After, 401...), as a collector restarting mid-stream does.

With `forward_to` it is a relay in front of a real trace store (Phoenix): each request is
passed on as it came and answered with the store's own answer (503 when the store does not
answer at all), and only spans the store acknowledged are kept. `before(k, action)` runs
`action` before the k-th request is handled, e.g. to stop the store at an exact point of the
stream.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

HOP_BY_HOP = frozenset({"host", "content-length", "connection", "keep-alive", "accept-encoding"})


@dataclass
class Received:
    """One span as the receiver stored it."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[dict[str, Any]]
    start_ns: int
    end_ns: int


def _value(any_value: dict[str, Any]) -> Any:
    if not any_value:
        return None
    ((kind, value),) = any_value.items()
    if kind == "intValue":
        return int(value)
    if kind == "arrayValue":
        return [_value(v) for v in value.get("values", [])]
    return value


def _attrs(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {item["key"]: _value(item.get("value", {})) for item in items}


def _hex(value: str, encoded_as_base64: bool) -> str:
    if not value:
        return ""
    return base64.b64decode(value).hex() if encoded_as_base64 else value


@dataclass
class Receiver:
    """Start with `with Receiver() as r:`; `r.url` is the endpoint to push to."""

    requests: list[dict[str, Any]] = field(default_factory=list)  # content type, spans, status
    spans: list[Received] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    forward_to: str | None = None
    forward_timeout: float = 60.0
    _failures: dict[int, tuple[int, dict[str, str]]] = field(default_factory=dict)
    _actions: dict[int, Callable[[], None]] = field(default_factory=dict)
    _count: int = 0  # POSTs seen

    def before(self, number: int, action: Callable[[], None]) -> None:
        """Run `action` when request `number` (counted from the start) arrives."""
        self._actions[number] = action

    def fail_after(
        self, seen: int, count: int, status: int = 503, headers: dict[str, str] | None = None
    ) -> None:
        """Requests number seen+1 .. seen+count (counted from the start) fail with `status`."""
        with self.lock:
            for number in range(seen + 1, seen + count + 1):
                self._failures[number] = (status, headers or {})

    def clear_failures(self) -> None:
        with self.lock:
            self._failures.clear()

    def __enter__(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                kind = self.headers.get("content-type", "")
                with receiver.lock:
                    receiver._count += 1
                    failure = receiver._failures.pop(receiver._count, None)
                    action = receiver._actions.pop(receiver._count, None)
                if action:
                    action()
                if self.path != "/v1/traces":
                    return self._answer(404, b"not found", "text/plain")
                if failure:
                    receiver.requests.append({"content_type": kind, "status": failure[0]})
                    return self._answer(failure[0], b"try later", "text/plain", failure[1])
                try:
                    spans = receiver._decode(body, kind)
                except Exception as error:  # noqa: BLE001 - a bad body is a 400, as collectors
                    return self._answer(400, str(error).encode(), "text/plain")
                if receiver.forward_to:
                    status, payload, answer_kind = receiver._forward(body, self.headers)
                    if not 200 <= status < 300:
                        receiver.requests.append({"content_type": kind, "status": status})
                        return self._answer(status, payload, answer_kind)
                with receiver.lock:
                    receiver.bodies.append(body)
                    receiver.spans += spans
                    receiver.requests.append(
                        {"content_type": kind, "status": 200, "spans": len(spans)}
                    )
                if receiver.forward_to:
                    return self._answer(status, payload, answer_kind)
                if "json" in kind:
                    return self._answer(200, b"{}", "application/json")
                payload = ExportTraceServiceResponse().SerializeToString()
                return self._answer(200, payload, "application/x-protobuf")

            def _answer(self, status, payload, kind, headers=None) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1/traces"

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def _forward(self, body: bytes, headers) -> tuple[int, bytes, str]:
        """(status, body, content type) of the store's answer to the same request (same
        headers, but those of the connection)."""
        passed = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
        try:
            answer = httpx.post(
                self.forward_to, content=body, headers=passed, timeout=self.forward_timeout
            )
        except httpx.HTTPError as error:
            return 503, f"the store did not answer: {error}".encode(), "text/plain"
        return answer.status_code, answer.content, answer.headers.get("content-type", "")

    def _decode(self, body: bytes, kind: str) -> list[Received]:
        if "json" in kind:
            data = json.loads(body)
            b64 = False
        elif "protobuf" in kind:
            request = ExportTraceServiceRequest.FromString(body)
            data = json_format.MessageToDict(request)
            b64 = True
        else:
            raise ValueError(f"unsupported content type {kind!r}")
        found = []
        for resource_spans in data.get("resourceSpans", []):
            resource = _attrs(resource_spans.get("resource", {}).get("attributes", []))
            for scope in resource_spans.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    found.append(
                        Received(
                            trace_id=_hex(span["traceId"], b64),
                            span_id=_hex(span["spanId"], b64),
                            parent_span_id=_hex(span.get("parentSpanId", ""), b64),
                            name=span.get("name", ""),
                            attributes=_attrs(span.get("attributes", [])),
                            resource=resource,
                            events=span.get("events", []),
                            start_ns=int(span.get("startTimeUnixNano", 0)),
                            end_ns=int(span.get("endTimeUnixNano", 0)),
                        )
                    )
        return found
