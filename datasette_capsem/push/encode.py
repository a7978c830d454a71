"""OTLP JSON (as graph/otlp.py writes it) to the bodies collectors accept over HTTP.

Protobuf is built with the `opentelemetry-proto` package's generated ExportTraceServiceRequest
from the same JSON document, so attributes are exactly those of `export-otlp`. The one
difference between OTLP/JSON and protobuf's JSON mapping is the encoding of ids (hex in
OTLP/JSON, base64 bytes in the mapping); it is converted here and nothing else is touched.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PROTOBUF, JSON = "application/x-protobuf", "application/json"
ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode("ascii")


def _proto_span(span: dict[str, Any]) -> dict[str, Any]:
    converted = dict(span)
    for name in ID_FIELDS:
        if converted.get(name):
            converted[name] = _b64(converted[name])
    return converted


def to_protobuf(document: dict[str, Any]) -> bytes:
    """Serialized ExportTraceServiceRequest of an OTLP JSON `resourceSpans` document."""
    mapped = {
        "resourceSpans": [
            {
                **resource_spans,
                "scopeSpans": [
                    {**scope, "spans": [_proto_span(s) for s in scope["spans"]]}
                    for scope in resource_spans["scopeSpans"]
                ],
            }
            for resource_spans in document["resourceSpans"]
        ]
    }
    request = json_format.ParseDict(mapped, ExportTraceServiceRequest())
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
