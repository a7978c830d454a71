"""The turn as chat (`…/traces/<id>/conversation.json`), rebuilt from the bodies on the wire.

Every model call of a trace sent the whole history so far and got one reply. Capsem keeps both
bodies in `event_body_blobs` (and the request again in `model_calls.request_body_preview`,
spec §4.4), so the conversation is read from them, per provider body format:

* Anthropic messages: `system`, `messages[].content` blocks (`text`, `thinking`, `tool_use`,
  `tool_result`); replies as JSON or an SSE stream of `content_block_*` events.
* OpenAI chat completions: `messages[]` (`system`/`developer`, `user`, `assistant` with
  `tool_calls`, `tool` with `tool_call_id`); replies as JSON `choices[].message` or a stream of
  `choices[].delta`.
* OpenAI Responses: `instructions` and `input` (text or items: messages, `function_call`,
  `function_call_output`, `reasoning`); replies as JSON `output[]` or a stream of `response.*`
  events.
* Gemini: `systemInstruction` and `contents[].parts` (`text`, `thought`, `functionCall`,
  `functionResponse`); replies as JSON (or a JSON array) or an SSE stream of chunks.
* Ollama chat: `messages[]` with `tool_calls` whose arguments are objects; replies as JSON or
  newline-delimited JSON chunks.

Each request repeats the history, so a step lists only what is new in it: the request's
messages are aligned (difflib) with what the previous step sent and got back, and the ones
that do not match are new (`rewrites` when they stand where an earlier message was). The
count of repeated messages is given, and the raw bodies are one link away.
"""

from __future__ import annotations

import difflib
import json
import marshal
import sqlite3
from collections.abc import Callable
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.values import as_float, as_int
from datasette_capsem.ledger.schema import LedgerSchema
from datasette_capsem.streams import sse_events

BODY_READ_BYTES = 4 * 1024 * 1024  # read of each body; a longer one is parsed as cut
MESSAGE_CHARS = 20_000  # text of one message part; the raw body holds the rest
MAX_STEPS = 1000
CALL_COLUMNS = (
    "id",
    "event_id",
    "timestamp",
    "provider",
    "model",
    "path",
    "stream",
    "stop_reason",
    "status_code",
    "input_tokens",
    "output_tokens",
    "estimated_cost_usd",
    "duration_ms",
    "text_content",
    "thinking_content",
    "system_prompt_preview",
    "request_body_preview",
)
FORMATS = ("anthropic", "openai-chat", "openai-responses", "gemini", "ollama")
PREVIEW_CHARS = 100  # the first words of a question or a reply, in lists and titles
# A request's model parameters, as providers name them (Gemini's inside `generationConfig`,
# Ollama's inside `options`): shown beside the chat, in this order. Stop sequences are left
# out: they are free text, which a reader under `hide_free_text` never sees.
PARAMETERS = (
    "model",
    "temperature",
    "top_p",
    "topP",
    "top_k",
    "topK",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "maxOutputTokens",
    "num_predict",
    "num_ctx",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "reasoning_effort",
    "reasoning",
    "thinking",
    "thinkingConfig",
    "tool_choice",
    "parallel_tool_calls",
    "stream",
)


# -- message parts -------------------------------------------------------------------------


def _part(role: str, kind: str, text: Any = "", **extra: Any) -> dict[str, Any]:
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False, sort_keys=True) if text is not None else ""
    part: dict[str, Any] = {"role": role, "type": kind, "text": text[:MESSAGE_CHARS]}
    if len(text) > MESSAGE_CHARS:
        part["cut"] = len(text)
    for key, value in extra.items():
        if value is not None and value != "":
            part[key] = value if isinstance(value, (bool, int)) else str(value)
    return part


def _arguments(value: Any) -> str:
    """Tool arguments as compact JSON text (a string that is JSON is re-encoded, so the same
    arguments read the same whether a provider sent them as text or as an object)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _texts(content: Any) -> str:
    """Text of a content that is a string or a list of text-bearing parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        found = []
        for item in content:
            if isinstance(item, str):
                found.append(item)
            elif isinstance(item, dict):
                value = item.get("text") if "text" in item else item.get("content")
                found.append(_texts(value) if value is not None else "")
        return "\n".join(t for t in found if t)
    if isinstance(content, dict):
        return _texts(content.get("text") or content.get("content"))
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def first_words(text: Any, size: int = PREVIEW_CHARS) -> str:
    """The first words of a text on one line, cut with "…" (which the masker reads as a cut)."""
    words = " ".join(str(text or "").split())
    return words if len(words) <= size else words[: size - 1].rstrip() + "\u2026"


# -- requests ------------------------------------------------------------------------------


def request_parameters(body: dict[str, Any]) -> dict[str, Any]:
    """The model parameters a request body sets (model, temperature, max tokens, …), each a
    number, a boolean or a short text (an object as compact JSON), and how many tools it offers."""
    found: dict[str, Any] = {}
    for source in (body, body.get("generationConfig"), body.get("options")):
        if not isinstance(source, dict):
            continue
        for key in PARAMETERS:
            value = source.get(key)
            if value is None or key in found:
                continue
            if not isinstance(value, (bool, int, float, str)):
                value = _arguments(value)
            found[key] = value[:200] if isinstance(value, str) else value
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        declared = [
            t["functionDeclarations"]
            for t in tools
            if isinstance(t, dict) and isinstance(t.get("functionDeclarations"), list)
        ]
        found["tools"] = sum(len(d) for d in declared) if declared else len(tools)
    return found


def _anthropic_blocks(role: str, content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [_part(role, "text", content)]
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(_part(role, "text", block.get("text")))
        elif kind in ("thinking", "redacted_thinking"):
            parts.append(_part(role, "thinking", block.get("thinking") or "[redacted thinking]"))
        elif kind in ("tool_use", "server_tool_use"):
            parts.append(
                _part(
                    role,
                    "tool_call",
                    _arguments(block.get("input")),
                    name=block.get("name"),
                    call_id=block.get("id"),
                )
            )
        elif kind == "tool_result":
            parts.append(
                _part(
                    "tool",
                    "tool_result",
                    _texts(block.get("content")),
                    call_id=block.get("tool_use_id"),
                    is_error=bool(block.get("is_error")),
                )
            )
        elif kind in ("image", "document"):
            parts.append(_part(role, kind, f"[{kind}]"))
        else:
            parts.append(_part(role, "other", json.dumps(block, ensure_ascii=False)))
    return parts


# A request parser gives (parts before the history, the history's items, the parts of one
# item): each item's parts depend on that item alone, so items a request repeats from the
# previous one are not parsed again (`_History`).
Parsed = tuple[list[dict[str, Any]], list[Any], Callable[[Any], list[dict[str, Any]]]]


def _anthropic_message(message: Any) -> list[dict[str, Any]]:
    if not isinstance(message, dict):
        return []
    return _anthropic_blocks(str(message.get("role") or "user"), message.get("content"))


def _anthropic_request(body: dict[str, Any]) -> Parsed:
    system = body.get("system")
    parts = [_part("system", "text", _texts(system))] if system else []
    return parts, list(body.get("messages") or []), _anthropic_message


def _chat_request(body: dict[str, Any]) -> Parsed:
    """OpenAI chat completions and Ollama chat (`messages`, roles, `tool_calls`)."""
    return [], list(body.get("messages") or []), _chat_message


def _chat_message(message: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if isinstance(message, dict):
        role = str(message.get("role") or "user")
        role = "system" if role == "developer" else role
        if role == "tool":
            parts.append(
                _part(
                    "tool",
                    "tool_result",
                    _texts(message.get("content")),
                    call_id=message.get("tool_call_id"),
                    name=message.get("tool_name") or message.get("name"),
                )
            )
            return parts
        if message.get("thinking"):
            parts.append(_part(role, "thinking", message["thinking"]))
        text = _texts(message.get("content"))
        if text or not message.get("tool_calls"):
            parts.append(_part(role, "text", text))
        if message.get("images"):
            parts.append(_part(role, "image", "[image]"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                parts.append(
                    _part(
                        role,
                        "tool_call",
                        _arguments(function.get("arguments")),
                        name=function.get("name"),
                        call_id=call.get("id"),
                    )
                )
    return parts


def _responses_items(items: Any, default_role: str = "user") -> list[dict[str, Any]]:
    parts = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or "message"
        if kind == "message":
            role = str(item.get("role") or default_role)
            role = "system" if role == "developer" else role
            parts.append(_part(role, "text", _texts(item.get("content"))))
        elif kind == "function_call":
            parts.append(
                _part(
                    "assistant",
                    "tool_call",
                    _arguments(item.get("arguments")),
                    name=item.get("name"),
                    call_id=item.get("call_id"),
                )
            )
        elif kind == "function_call_output":
            parts.append(
                _part(
                    "tool", "tool_result", _texts(item.get("output")), call_id=item.get("call_id")
                )
            )
        elif kind == "reasoning":
            parts.append(_part("assistant", "thinking", _texts(item.get("summary"))))
        else:
            parts.append(_part(default_role, "other", json.dumps(item, ensure_ascii=False)))
    return parts


def _responses_item(item: Any) -> list[dict[str, Any]]:
    return _responses_items([item])


def _responses_request(body: dict[str, Any]) -> Parsed:
    parts = (
        [_part("system", "text", _texts(body["instructions"]))] if body.get("instructions") else []
    )
    given = body.get("input")
    if isinstance(given, str):
        return [*parts, _part("user", "text", given)], [], _responses_item
    return parts, given if isinstance(given, list) else [], _responses_item


def _gemini_parts(role: str, given: Any) -> list[dict[str, Any]]:
    parts = []
    for part in given if isinstance(given, list) else []:
        if not isinstance(part, dict):
            continue
        if "functionCall" in part or "function_call" in part:
            call = part.get("functionCall") or part.get("function_call") or {}
            parts.append(
                _part(
                    role,
                    "tool_call",
                    _arguments(call.get("args")),
                    name=call.get("name"),
                    call_id=call.get("id"),
                )
            )
        elif "functionResponse" in part or "function_response" in part:
            answer = part.get("functionResponse") or part.get("function_response") or {}
            result = answer.get("response")
            if isinstance(result, dict) and len(result) == 1:  # {"output": "…"}: its text
                only = next(iter(result.values()))
                result = only if isinstance(only, str) else result
            result = result if isinstance(result, str) else _arguments(result)
            parts.append(
                _part(
                    "tool", "tool_result", result, name=answer.get("name"), call_id=answer.get("id")
                )
            )
        elif "text" in part:
            parts.append(_part(role, "thinking" if part.get("thought") else "text", part["text"]))
        elif "inlineData" in part or "fileData" in part:
            parts.append(_part(role, "image", "[inline data]"))
    return parts


def _gemini_content(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, dict):
        return []
    role = "assistant" if content.get("role") == "model" else str(content.get("role") or "user")
    return _gemini_parts(role, content.get("parts"))


def _gemini_request(body: dict[str, Any]) -> Parsed:
    system = body.get("systemInstruction") or body.get("system_instruction")
    parts = []
    if isinstance(system, dict):
        parts.append(_part("system", "text", _texts(system.get("parts"))))
    return parts, list(body.get("contents") or []), _gemini_content


def request_format(body: Any, path: Any = None, provider: Any = None) -> str | None:
    """Which provider format a request body is in, by its shape first and its path next."""
    if not isinstance(body, dict):
        return None
    path = str(path or "")
    if "contents" in body:
        return "gemini"
    if "messages" not in body and ("input" in body or "instructions" in body):
        return "openai-responses"
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    if "system" in body or any(
        b.get("type") in ("tool_use", "tool_result")
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict)
    ):
        return "anthropic"
    if path.startswith("/api/") or provider == "ollama":
        return "ollama"
    if "/v1/messages" in path or provider == "anthropic":
        return "anthropic"
    return "openai-chat"


REQUEST_PARSERS = {
    "anthropic": _anthropic_request,
    "openai-chat": _chat_request,
    "ollama": _chat_request,
    "openai-responses": _responses_request,
    "gemini": _gemini_request,
}


def _mark(item: Any) -> bytes | object:
    """A request item's exact form: equal marks, equal items (types and key order too, which
    `==` ignores: 1 == 1.0 == True, and an item's text keeps them)."""
    try:
        return marshal.dumps(item)
    except ValueError:  # too deep to marshal: never equal to another item
        return object()


def _common_head(old: list[Any], new: list[Any]) -> int:
    """How many first elements `old` and `new` share (one comparison in the usual case, where
    one starts with the whole other)."""
    limit = min(len(old), len(new))
    if old[:limit] == new[:limit]:
        return limit
    head = 0
    while head < limit and old[head] == new[head]:
        head += 1
    return head


class _History:
    """The items of the last request parsed, with their parts and the parts' keys: a request
    repeats the history of the one before it, so only the items after their common head are
    parsed (an item's parts depend on that item alone). The parts handed out are shared with
    the next request's: never mark them (`build_steps` copies what it shows)."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.marks: list[Any] = []
        self.parts: list[list[dict[str, Any]]] = []
        self.keys: list[list[tuple]] = []

    def parts_of(self, kind: str, items: list[Any], parse) -> tuple[list[dict], list[tuple]]:
        try:
            marks = [marshal.dumps(item) for item in items]
        except ValueError:  # an item too deep to marshal
            marks = [_mark(item) for item in items]
        head = _common_head(self.marks, marks) if kind == self.kind else 0
        parts = self.parts[:head] + [parse(item) for item in items[head:]]
        keys = self.keys[:head] + [[_key(part) for part in item] for item in parts[head:]]
        self.kind, self.marks, self.parts, self.keys = kind, marks, parts, keys
        return [p for item in parts for p in item], [k for item in keys for k in item]


def _parse_request(
    text: str | None, path: Any, provider: Any, history: _History
) -> tuple[dict[str, Any], list[tuple]]:
    """`parse_request`, and the keys of its messages; the messages are shared with
    `history` (not to be changed)."""
    if not text:
        return {"format": None, "messages": [], "problem": "no request body recorded"}, []
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return {"format": None, "messages": [], "problem": "the request body is not JSON"}, []
    kind = request_format(body, path, provider)
    if kind is None:
        return {"format": None, "messages": [], "problem": "not a chat request body"}, []
    head, items, parse = REQUEST_PARSERS[kind](body)
    parts, keys = history.parts_of(kind, items, parse)
    found = {
        "format": kind,
        "messages": head + parts,
        "problem": None,
        "parameters": request_parameters(body),
    }
    return found, [_key(part) for part in head] + keys


def parse_request(text: str | None, path: Any = None, provider: Any = None) -> dict[str, Any]:
    """{format, messages, problem}: the history one request sent."""
    return _parse_request(text, path, provider, _History())[0]


# -- replies -------------------------------------------------------------------------------


class _Reply:
    """A reply assembled from JSON or from the chunks of a stream, whatever the provider."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.blocks: dict[Any, dict[str, Any]] = {}  # streamed blocks by index
        self.stop: str | None = None
        self.final: list[dict[str, Any]] | None = None  # a whole reply a stream ended with

    def text(self, kind: str, text: str, key: Any = None) -> None:
        """Append streamed text to the open block of that kind (or open one)."""
        if not text:
            return
        key = key if key is not None else ("text", kind)
        block = self.blocks.get(key)
        if block is None or block["type"] != kind:
            block = {"role": "assistant", "type": kind, "text": ""}
            self.blocks[key] = block
            self.parts.append(block)
        block["text"] += text

    def call(self, key: Any, name: Any = None, call_id: Any = None, arguments: str = "") -> None:
        block = self.blocks.get(key)
        if block is None or block["type"] != "tool_call":
            block = {
                "role": "assistant",
                "type": "tool_call",
                "text": "",
                "name": None,
                "call_id": None,
            }
            self.blocks[key] = block
            self.parts.append(block)
        block["name"] = block["name"] or name
        block["call_id"] = block["call_id"] or call_id
        block["text"] += arguments

    def add(self, data: Any) -> None:  # noqa: C901 - one branch per provider's chunk shape
        if not isinstance(data, dict):
            return
        kind = str(data.get("type") or "")
        if kind == "content_block_start":  # Anthropic stream
            block = data.get("content_block") or {}
            index = ("a", data.get("index"))
            if block.get("type") in ("tool_use", "server_tool_use"):
                self.call(index, block.get("name"), block.get("id"))
            elif block.get("type") == "text":
                self.text("text", block.get("text") or "", index)
            elif block.get("type") == "thinking":
                self.text("thinking", block.get("thinking") or "", index)
        elif kind == "content_block_delta":
            delta, index = data.get("delta") or {}, ("a", data.get("index"))
            if isinstance(delta.get("partial_json"), str):
                self.call(index, arguments=delta["partial_json"])
            elif isinstance(delta.get("thinking"), str):
                self.text("thinking", delta["thinking"], index)
            elif isinstance(delta.get("text"), str):
                self.text("text", delta["text"], index)
        elif kind == "message_delta":
            self.stop = (data.get("delta") or {}).get("stop_reason") or self.stop
        elif kind == "message_start":
            return
        elif kind.startswith("response."):  # OpenAI Responses stream
            if kind == "response.output_text.delta":
                self.text("text", str(data.get("delta") or ""), ("r", data.get("output_index")))
            elif "reasoning" in kind and kind.endswith(".delta"):
                self.text(
                    "thinking", str(data.get("delta") or ""), ("rr", data.get("output_index"))
                )
            elif kind == "response.output_item.added":
                item = data.get("item") or {}
                if item.get("type") == "function_call":
                    self.call(
                        ("r", data.get("output_index")), item.get("name"), item.get("call_id")
                    )
            elif kind == "response.function_call_arguments.delta":
                self.call(("r", data.get("output_index")), arguments=str(data.get("delta") or ""))
            elif kind in ("response.completed", "response.incomplete", "response.failed"):
                response = data.get("response") or {}
                if isinstance(response.get("output"), list) and response["output"]:
                    self.final = _responses_items(response["output"], "assistant")
                self.stop = response.get("status") or self.stop
        elif isinstance(data.get("content"), list) and data.get("type") == "message":
            self.final = _anthropic_blocks("assistant", data["content"])  # Anthropic JSON
            self.stop = data.get("stop_reason")
        elif isinstance(data.get("output"), list):  # Responses JSON
            self.final = _responses_items(data["output"], "assistant")
            self.stop = data.get("status")
        elif isinstance(data.get("choices"), list):  # OpenAI chat: JSON or stream chunk
            for choice in data["choices"]:
                if not isinstance(choice, dict):
                    continue
                self.stop = choice.get("finish_reason") or self.stop
                message = choice.get("message")
                if isinstance(message, dict):
                    self.final = _chat_message({**message, "role": "assistant"})
                    continue
                delta = choice.get("delta") or {}
                self.text("thinking", delta.get("reasoning_content") or "", ("c", "t"))
                self.text("text", delta.get("content") or "", ("c", "x"))
                for call in delta.get("tool_calls") or []:
                    function = call.get("function") or {}
                    self.call(
                        ("c", call.get("index", 0)),
                        function.get("name"),
                        call.get("id"),
                        function.get("arguments") or "",
                    )
        elif isinstance(data.get("candidates"), list):  # Gemini: JSON or stream chunk
            for candidate in data["candidates"][:1]:
                content = candidate.get("content") if isinstance(candidate, dict) else None
                for part in _gemini_parts("assistant", (content or {}).get("parts")):
                    if part["type"] in ("text", "thinking"):
                        self.text(part["type"], part["text"])
                    else:
                        self.parts.append(part)
                        self.blocks = {}
                self.stop = (candidate or {}).get("finishReason") or self.stop
        elif isinstance(data.get("message"), dict):  # Ollama: JSON or NDJSON chunk
            message = data["message"]
            self.text("thinking", message.get("thinking") or "")
            self.text("text", message.get("content") or "")
            for call in message.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    self.parts.append(
                        _part(
                            "assistant",
                            "tool_call",
                            _arguments(function.get("arguments")),
                            name=function.get("name"),
                        )
                    )
            self.stop = data.get("done_reason") or self.stop
        elif isinstance(data.get("content"), list):  # Anthropic JSON without "type"
            self.final = _anthropic_blocks("assistant", data["content"])
            self.stop = data.get("stop_reason")

    def result(self) -> list[dict[str, Any]]:
        parts = self.final if self.final is not None else self.parts
        out = []
        for part in parts:
            if part["type"] == "tool_call":
                part = {**part, "text": _arguments(part["text"]) if part["text"] else "{}"}
            if part["type"] in ("text", "thinking") and not part["text"]:
                continue
            out.append(
                _part(
                    part["role"],
                    part["type"],
                    part["text"],
                    **{k: part.get(k) for k in ("name", "call_id", "is_error")},
                )
            )
        return out


def _chunks(text: str) -> tuple[str, list[Any]] | None:
    """(shape, JSON values) of a reply body: one JSON value, a JSON array of chunks (Gemini
    without `alt=sse`), an SSE stream, or newline-delimited JSON (Ollama)."""
    stripped = text.lstrip()
    if stripped.startswith(("event:", "data:", ":")):
        values = []
        for event in sse_events(text):
            data = event["data"]
            if not event["json"] or not isinstance(data, str):
                continue
            try:
                values.append(json.loads(data))
            except (ValueError, RecursionError):
                continue
        return "sse", values
    try:
        value = json.loads(text)
        if isinstance(value, list):
            return "json-array", value
        return "json", [value]
    except (ValueError, RecursionError):
        pass
    values = []
    for line in text.splitlines():
        if line.strip():
            try:
                values.append(json.loads(line))
            except (ValueError, RecursionError):
                return None
    return ("ndjson", values) if values else None


def parse_reply(text: str | None) -> dict[str, Any]:
    """{shape, messages, stop, problem}: what the model answered."""
    if not text:
        return {"shape": None, "messages": [], "stop": None, "problem": "no response body recorded"}
    found = _chunks(text)
    if found is None:
        return {"shape": None, "messages": [], "stop": None, "problem": "the response is not JSON"}
    shape, values = found
    reply = _Reply()
    for value in values:
        reply.add(value)
    return {"shape": shape, "messages": reply.result(), "stop": reply.stop, "problem": None}


# -- steps ---------------------------------------------------------------------------------


def _key(part: dict[str, Any]) -> tuple:
    """What makes two messages the same, across a reply and its echo in the next request."""
    text = part["text"].strip()
    if part["type"] in ("tool_call", "tool_result"):
        text = _arguments(text) if text[:1] in ("{", "[") else text
    return (
        part["role"],
        part["type"],
        text,
        part.get("name") if part["type"] == "tool_call" else None,
        part.get("call_id"),
    )


def _align(old: list[tuple], new: list[tuple]) -> list[tuple[str, int, int, int, int]]:
    """difflib's opcodes from the keys `old` to the keys `new`."""
    # The history usually comes back whole: take the common head as repeated, and align only
    # what follows it (difflib over a 1,000-message history at every step is slow).
    head = _common_head(old, new)
    matcher = difflib.SequenceMatcher(None, old[head:], new[head:], autojunk=False)
    opcodes = [("equal", 0, head, 0, head)] if head else []
    return opcodes + [
        (tag, i1 + head, i2 + head, j1 + head, j2 + head)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
    ]


def _counts(opcodes: list[tuple[str, int, int, int, int]]) -> dict[str, int]:
    counts = {"repeated": 0, "new": 0, "dropped": 0}
    for tag, i1, i2, j1, j2 in opcodes:
        counts["repeated" if tag == "equal" else "new"] += j2 - j1
        if tag in ("replace", "delete"):
            counts["dropped"] += i2 - i1
    return counts


def mark_new(messages: list[dict[str, Any]], before: list[dict[str, Any]]) -> dict[str, int]:
    """Mark each message of a request `new` unless it repeats `before` (the previous request
    and its reply); returns the counts of repeated, new and dropped earlier messages."""
    opcodes = _align([_key(m) for m in before], [_key(m) for m in messages])
    for tag, _i1, _i2, j1, j2 in opcodes:
        for index in range(j1, j2):
            messages[index]["index"] = index
            messages[index]["new"] = tag != "equal"
            if tag == "replace":
                messages[index]["rewrites"] = True
    return _counts(opcodes)


def _marked(
    messages: list[dict[str, Any]], opcodes: list[tuple[str, int, int, int, int]], new: bool
) -> list[dict[str, Any]]:
    """Copies of the messages `mark_new` marks new (`new`) or repeated, marked as it does."""
    found = []
    for tag, _i1, _i2, j1, j2 in opcodes:
        if (tag != "equal") != new:
            continue
        for index in range(j1, j2):
            part = {**messages[index], "index": index, "new": new}
            if tag == "replace":
                part["rewrites"] = True
            found.append(part)
    return found


def build_steps(calls: list[dict[str, Any]], history: bool = False) -> list[dict[str, Any]]:
    """One step per model call: its request's new messages and its reply. `calls` carry the
    row (`row`) and the body texts (`request_text`, `response_text`) and their sources. With
    `history`, the last step also lists the messages its request repeated (`history`)."""
    steps, before, seen = [], [], _History()
    for number, call in enumerate(calls, 1):
        row = call["row"]
        request, keys = _parse_request(
            call.get("request_text"), row.get("path"), row.get("provider"), seen
        )
        reply = parse_reply(call.get("response_text"))
        if not reply["messages"] and (row.get("text_content") or row.get("thinking_content")):
            # No response body (eras before blobs): the columns Capsem assembled from it.
            reply["messages"] = [
                _part("assistant", kind, row[column])
                for kind, column in (("thinking", "thinking_content"), ("text", "text_content"))
                if row.get(column)
            ]
            reply["problem"], reply["shape"] = None, "columns"
        messages = request["messages"]
        opcodes = _align(before, keys)
        for part in reply["messages"]:
            part["new"] = True
        before = keys + [_key(part) for part in reply["messages"]]
        step = {
            "model_call": f"model_calls:{row['id']}",
            "model_call_id": row["id"],
            "timestamp": row.get("timestamp"),
            "provider": row.get("provider"),
            "model": row.get("model"),
            "path": row.get("path"),
            "format": request["format"],
            "stop_reason": row.get("stop_reason"),
            "reply_stop": reply["stop"],
            "input_tokens": as_int(row.get("input_tokens")),
            "output_tokens": as_int(row.get("output_tokens")),
            "cost_usd": as_float(row.get("estimated_cost_usd")),
            "duration_ms": as_float(row.get("duration_ms")),
            "parameters": request.get("parameters") or {},
            "request": {
                **call["request_source"],
                "problem": request["problem"],
                "messages": len(messages),
                **_counts(opcodes),
            },
            "response": {
                **call["response_source"],
                "problem": reply["problem"],
                "shape": reply["shape"],
            },
            "messages": _marked(messages, opcodes, True),
            "reply": reply["messages"],
        }
        if history and number == len(calls):
            step["history"] = _marked(messages, opcodes, False)  # the repeated ones
        steps.append(step)
    return steps


def _asked(messages: list[dict[str, Any]]) -> str | None:
    """What the user asked in a request: its last user text (the turn's prompt; the history
    before it is earlier turns)."""
    for part in reversed(messages):
        if part["role"] == "user" and part["type"] == "text" and part["text"].strip():
            return part["text"]
    return None


def _answered(messages: list[dict[str, Any]]) -> str | None:
    """How a reply began: its text, else the tools it called."""
    text = " ".join(p["text"] for p in messages if p["type"] == "text" and p["text"].strip())
    if text:
        return text
    tools = [str(p.get("name") or "?") for p in messages if p["type"] == "tool_call"]
    return "(called " + ", ".join(tools) + ")" if tools else None


def turn_preview(calls: list[dict[str, Any]]) -> dict[str, str | None]:
    """{request_preview, response_preview}: the first words of what a turn was asked (the last
    user text of its first request) and of how its last reply began (`calls`: its first and
    last model calls, as `load_conversation` gives them). Free text: the views mask it."""
    found: dict[str, str | None] = {"request_preview": None, "response_preview": None}
    if not calls:
        return found
    first, last = calls[0], calls[-1]
    row = first["row"]
    asked = _asked(
        parse_request(first.get("request_text"), row.get("path"), row.get("provider"))["messages"]
    )
    reply = parse_reply(last.get("response_text"))["messages"]
    answered = _answered(reply) or last["row"].get("text_content")
    found["request_preview"] = first_words(asked) if asked else None
    found["response_preview"] = first_words(answered) if answered else None
    return found


def load_turn_preview(
    conn: sqlite3.Connection, schema: LedgerSchema, first_id: Any, last_id: Any
) -> dict[str, str | None]:
    """`turn_preview` of the turn whose first and last model calls are these ids."""
    ids = [i for i in dict.fromkeys((first_id, last_id)) if isinstance(i, int)]
    return turn_preview(load_conversation(conn, schema, ids))


def _decode(data: Any) -> str | None:
    if data is None:
        return None
    if isinstance(data, str):
        return data
    return bytes(data).decode("utf-8", "replace")


def load_conversation(
    conn: sqlite3.Connection, schema: LedgerSchema, call_ids: list[int]
) -> list[dict[str, Any]]:
    """The model calls `call_ids` (in time order) with their request and response bodies:
    the body blobs when the ledger has them, else the request preview (a full body, spec
    §4.4) and the reply columns."""
    if "model_calls" not in schema.tables or not call_ids:
        return []
    rows = lsql.run(
        conn,
        "rows_by_id",
        {"ids": lsql.json_list(call_ids)},
        schema=schema,
        table="model_calls",
        columns=CALL_COLUMNS,
    )
    rows.sort(key=lambda r: (str(r.get("timestamp") or ""), r["id"]))
    rows = rows[:MAX_STEPS]
    blobs: dict[tuple[Any, str], dict[str, Any]] = {}
    if schema.has("event_body_blobs", "event_id", "body", "direction"):
        events = [r["event_id"] for r in rows if r.get("event_id")]
        params = {"event_ids": lsql.json_list(events), "limit": BODY_READ_BYTES}
        for blob in lsql.run(conn, "conversation_bodies", params):
            if blob.get("source_table") in (None, "model_calls"):
                blobs.setdefault((blob["event_id"], str(blob.get("direction"))), blob)
    calls = []
    for row in rows:
        call: dict[str, Any] = {"row": row}
        for direction in ("request", "response"):
            blob = blobs.get((row.get("event_id"), direction))
            if blob is not None:
                call[f"{direction}_text"] = _decode(blob["body"])
                call[f"{direction}_source"] = {
                    "source": "event_body_blobs",
                    "blob_id": blob["id"],
                    "event_id": blob["event_id"],
                    "bytes": blob.get("body_length"),
                    "cut": (blob.get("body_length") or 0) > BODY_READ_BYTES
                    or bool(blob.get("truncated")),
                }
            elif direction == "request" and row.get("request_body_preview"):
                text = _decode(row["request_body_preview"])
                call["request_text"] = text
                call["request_source"] = {
                    "source": "model_calls.request_body_preview",
                    "bytes": len(text.encode()),
                }
            else:
                call[f"{direction}_source"] = {"source": None}
        calls.append(call)
    return calls
