"""OTLP JSON (as graph/otlp.py writes it) to the bodies collectors accept over HTTP.

Protobuf is built with the `opentelemetry-proto` package's generated ExportTraceServiceRequest
from the same JSON document, field by field, so attributes are exactly those of `export-otlp`
(ids go from hex to bytes, 64-bit integers from strings). tests/test_push_otlp.py checks the
result against protobuf's own JSON mapping.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

PROTOBUF, JSON = "application/x-protobuf", "application/json"


def _any_value(value: dict[str, Any], target: AnyValue) -> None:
    if not value:
        return  # an unusable float: an empty AnyValue, as in the JSON
    ((kind, content),) = value.items()
    if kind == "stringValue":
        target.string_value = content
    elif kind == "intValue":
        target.int_value = int(content)
    elif kind == "doubleValue":
        target.double_value = content
    elif kind == "boolValue":
        target.bool_value = content
    elif kind == "arrayValue":
        for item in content.get("values", ()):
            _any_value(item, target.array_value.values.add())
    else:
        raise ValueError(f"unknown OTLP value kind {kind!r}")


def _attributes(items: list[dict[str, Any]], target) -> None:
    for item in items:
        entry = target.add()
        entry.key = item["key"]
        _any_value(item.get("value") or {}, entry.value)


def _span(span: dict[str, Any], target: Span) -> None:
    target.trace_id = bytes.fromhex(span["traceId"])
    target.span_id = bytes.fromhex(span["spanId"])
    if span.get("parentSpanId"):
        target.parent_span_id = bytes.fromhex(span["parentSpanId"])
    target.name = span["name"]
    target.kind = span["kind"]
    target.start_time_unix_nano = int(span["startTimeUnixNano"])
    target.end_time_unix_nano = int(span["endTimeUnixNano"])
    _attributes(span.get("attributes", ()), target.attributes)
    for event in span.get("events", ()):
        added = target.events.add()
        added.time_unix_nano = int(event["timeUnixNano"])
        added.name = event["name"]
        _attributes(event.get("attributes", ()), added.attributes)
    status = span.get("status") or {}
    target.status.code = status.get("code", 0)
    if status.get("message"):
        target.status.message = status["message"]


def to_protobuf(document: dict[str, Any]) -> bytes:
    """Serialized ExportTraceServiceRequest of an OTLP JSON `resourceSpans` document: the
    same fields, ids from hex to bytes, 64-bit integers from strings."""
    request = ExportTraceServiceRequest()
    for resource_spans in document["resourceSpans"]:
        added = request.resource_spans.add()
        _attributes(resource_spans["resource"]["attributes"], added.resource.attributes)
        for scope in resource_spans["scopeSpans"]:
            scope_spans = added.scope_spans.add()
            scope_spans.scope.name = scope["scope"]["name"]
            scope_spans.scope.version = scope["scope"].get("version", "")
            for span in scope["spans"]:
                _span(span, scope_spans.spans.add())
    return request.SerializeToString()


def encode(document: dict[str, Any], content_type: str) -> bytes:
    if content_type == PROTOBUF:
        return to_protobuf(document)
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def rejected_spans(body: bytes, content_type: str | None) -> tuple[int, str]:
    """(rejected span count, message) of an OTLP response's partial_success, (0, '') if none
    or if the body is not an OTLP response."""
    if not body:
        return 0, ""
    try:
        if content_type and "json" in content_type:
            data = json.loads(body)
            partial = data.get("partialSuccess") or {}
            return int(partial.get("rejectedSpans") or 0), str(partial.get("errorMessage") or "")
        response = ExportTraceServiceResponse.FromString(body)
    except Exception:  # noqa: BLE001 - a receiver's odd body is not our failure
        return 0, ""
    partial = response.partial_success
    return int(partial.rejected_spans), partial.error_message
