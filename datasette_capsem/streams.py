"""Server-sent event streams as Capsem records them (spec §4.4): the events of a
`text/event-stream` body, and the text (and thinking) their deltas assemble to.

The lowest layer holds it because the credential policy needs it (`redaction.mask_stream`: a
viewer never sees a streamed fragment, only the assembled text, masked) as much as the body
pages do (`graph/bodies.py`).
"""

from __future__ import annotations

import json
from typing import Any

MAX_SSE_EVENTS = 500


def json_pretty(text: str) -> str | None:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None


def sse_events(text: str, limit: int | None = MAX_SSE_EVENTS) -> list[dict[str, Any]]:
    """Split a `text/event-stream` into its events (the first `limit`, or all with None);
    JSON data is pretty-printed."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        event: dict[str, Any] = {"event": None, "id": None, "data": []}
        for line in block.split("\n"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                event["data"].append(value)
            elif field in ("event", "id"):
                event[field] = value
        data = "\n".join(event["data"])
        pretty = json_pretty(data) if data.strip() else None
        events.append({**event, "data": pretty or data, "json": pretty is not None})
        if limit is not None and len(events) >= limit:
            break
    return events


def delta_text(data: Any) -> tuple[str, str]:
    """(text, thinking) one streamed event adds, for the providers Capsem records: Anthropic
    `content_block_delta`, OpenAI chat `choices[].delta`, Responses `response.*.delta`,
    Gemini `candidates[].content.parts[]` and Ollama `message`."""
    if not isinstance(data, dict):
        return "", ""
    text, thinking = [], []
    delta = data.get("delta")
    kind = str(data.get("type") or "")
    if isinstance(delta, dict):  # Anthropic
        for key, into in (("text", text), ("thinking", thinking), ("partial_json", text)):
            if isinstance(delta.get(key), str):
                into.append(delta[key])
    elif isinstance(delta, str) and kind.startswith("response."):  # OpenAI Responses
        (thinking if "reasoning" in kind else text).append(delta)
    choices = data.get("choices")
    for choice in choices if isinstance(choices, list) else []:  # OpenAI chat completions
        part = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(part, dict):
            if isinstance(part.get("content"), str):
                text.append(part["content"])
            if isinstance(part.get("reasoning_content"), str):
                thinking.append(part["reasoning_content"])
            calls = part.get("tool_calls")
            for call in calls if isinstance(calls, list) else []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                    text.append(function["arguments"])
    candidates = data.get("candidates")
    for candidate in candidates if isinstance(candidates, list) else []:  # Gemini
        content = candidate.get("content") if isinstance(candidate, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                (thinking if part.get("thought") else text).append(part["text"])
    message = data.get("message")  # Ollama
    if isinstance(message, dict) and isinstance(message.get("content"), str):
        text.append(message["content"])
    return "".join(text), "".join(thinking)


def sse_text(events: list[dict[str, Any]]) -> dict[str, str]:
    """The text (and thinking) a stream of events assembles to, decoded from its deltas."""
    text, thinking = [], []
    for event in events:
        try:
            data = json.loads(event["data"]) if event.get("json") else None
        except (ValueError, RecursionError):
            data = None
        added, thought = delta_text(data)
        text.append(added)
        thinking.append(thought)
    return {"text": "".join(text), "thinking": "".join(thinking)}


def is_sse(media: str, text: str) -> bool:
    """Whether a body is an event stream: by its media type, or by its first field."""
    if media == "text/event-stream":
        return True
    head = text[:1024].lstrip()[:16]  # not a copy of a large text
    return head.startswith(("event:", "data:")) and "\n\n" in text


def streamed_fragment(data: Any) -> bool:
    """Whether one event's data (parsed JSON) adds a fragment of text, thinking or tool
    arguments to the stream (`delta_text`)."""
    text, thinking = delta_text(data)
    return bool(text or thinking)
