"""Provider bodies as the providers send them, for the conversation view's tests: a three-step
agentic turn (read a file, run the tests, answer) in each body format Capsem records, and a
writer that puts them into a copy of a generated ledger with sqlite3."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from datasette_capsem.generate.content import blake3_ref

SYSTEM = "You are a coding agent. Work in /root/project."
USER = "Fix the failing test in a.py"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
FIRST_TEXT = "Let me look."
CALLS = [
    ("read_file", {"path": "a.py"}, "def f():\n    return None"),
    ("bash", {"command": "pytest -q"}, "3 passed in 0.41s"),
]
FINAL = "Done: the tests pass."
PATHS = {
    "anthropic": ("anthropic", "/v1/messages"),
    "openai-chat": ("openai", "/v1/chat/completions"),
    "openai-responses": ("openai", "/v1/responses"),
    "gemini": ("google", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
    "ollama": ("ollama", "/api/chat"),
}


def sse(*events: dict, named: bool = False) -> str:
    out = []
    for event in events:
        head = f"event: {event['type']}\n" if named else ""
        out.append(f"{head}data: {json.dumps(event)}\n\n")
    return "".join(out)


def _text_of(step: int) -> str | None:
    return FIRST_TEXT if step == 0 else (FINAL if step == 2 else None)


# -- Anthropic messages --------------------------------------------------------------------


def _anthropic_reply_blocks(step: int) -> list[dict]:
    blocks = [{"type": "text", "text": _text_of(step)}] if _text_of(step) else []
    if step < 2:
        name, args, _ = CALLS[step]
        blocks.append({"type": "tool_use", "id": f"toolu_{step}", "name": name, "input": args})
    return blocks


def anthropic(step: int, user: str) -> tuple[str, str]:
    messages = [{"role": "user", "content": user}]
    for done in range(step):
        messages.append({"role": "assistant", "content": _anthropic_reply_blocks(done)})
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{done}",
                        "content": CALLS[done][2],
                    }
                ],
            }
        )
    request = {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 8192,
        "stream": True,
        "system": [{"type": "text", "text": SYSTEM}],
        "messages": messages,
        "tools": [{"name": n, "input_schema": {"type": "object"}} for n, _, _ in CALLS],
    }
    events = [{"type": "message_start", "message": {"id": "msg_1", "content": []}}]
    for index, block in enumerate(_anthropic_reply_blocks(step)):
        if block["type"] == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            half = len(block["text"]) // 2
            for piece in (block["text"][:half], block["text"][half:]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    }
                )
        else:
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                }
            )
            raw = json.dumps(block["input"])
            for piece in (raw[:5], raw[5:]):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    }
                )
        events.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if step < 2 else "end_turn"
    events += [{"type": "message_delta", "delta": {"stop_reason": stop}}, {"type": "message_stop"}]
    return json.dumps(request), sse(*events, named=True)


# -- OpenAI chat completions ---------------------------------------------------------------


def _chat_reply(step: int) -> dict:
    message: dict = {"role": "assistant", "content": _text_of(step)}
    if step < 2:
        name, args, _ = CALLS[step]
        message["tool_calls"] = [
            {
                "id": f"call_{step}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ]
    return message


def openai_chat(step: int, user: str) -> tuple[str, str]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    for done in range(step):
        messages.append(_chat_reply(done))
        messages.append({"role": "tool", "tool_call_id": f"call_{done}", "content": CALLS[done][2]})
    request = {"model": "gpt-4.1", "stream": step != 1, "messages": messages}
    reply = _chat_reply(step)
    finish = "tool_calls" if step < 2 else "stop"
    if step == 1:  # a non-streamed reply
        return json.dumps(request), json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "choices": [{"index": 0, "message": reply, "finish_reason": finish}],
            }
        )
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    if reply["content"]:
        for piece in (reply["content"][:3], reply["content"][3:]):
            chunks.append({"choices": [{"index": 0, "delta": {"content": piece}}]})
    for call in reply.get("tool_calls", []):
        arguments = call["function"]["arguments"]
        chunks.append(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            }
        )
        for piece in (arguments[:4], arguments[4:]):
            chunks.append(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [{"index": 0, "function": {"arguments": piece}}]
                            },
                        }
                    ]
                }
            )
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return json.dumps(request), sse(*chunks) + "data: [DONE]\n\n"


# -- OpenAI Responses ----------------------------------------------------------------------


def _responses_output(step: int) -> list[dict]:
    output = []
    if _text_of(step):
        output.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{step}",
                "content": [{"type": "output_text", "text": _text_of(step)}],
            }
        )
    if step < 2:
        name, args, _ = CALLS[step]
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{step}",
                "call_id": f"call_{step}",
                "name": name,
                "arguments": json.dumps(args),
            }
        )
    return output


def openai_responses(step: int, user: str) -> tuple[str, str]:
    given = [{"role": "user", "content": [{"type": "input_text", "text": user}]}]
    for done in range(step):
        given += _responses_output(done)
        given.append(
            {"type": "function_call_output", "call_id": f"call_{done}", "output": CALLS[done][2]}
        )
    request = {"model": "gpt-5", "instructions": SYSTEM, "input": given, "stream": True}
    output = _responses_output(step)
    events = [{"type": "response.created", "response": {"id": "resp_1", "output": []}}]
    for index, item in enumerate(output):
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "arguments": ""} if "arguments" in item else item,
            }
        )
        if item["type"] == "message":
            events.append(
                {
                    "type": "response.output_text.delta",
                    "output_index": index,
                    "delta": item["content"][0]["text"],
                }
            )
        else:
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": index,
                    "delta": item["arguments"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append(
        {
            "type": "response.completed",
            "response": {"id": "resp_1", "status": "completed", "output": output},
        }
    )
    return json.dumps(request), sse(*events, named=True)


# -- Gemini --------------------------------------------------------------------------------


def _gemini_parts(step: int) -> list[dict]:
    parts = [{"text": _text_of(step)}] if _text_of(step) else []
    if step < 2:
        name, args, _ = CALLS[step]
        parts.append({"functionCall": {"name": name, "args": args}})
    return parts


def gemini(step: int, user: str) -> tuple[str, str]:
    contents = [{"role": "user", "parts": [{"text": user}]}]
    for done in range(step):
        contents.append({"role": "model", "parts": _gemini_parts(done)})
        name, _, result = CALLS[done]
        contents.append(
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": name, "response": {"output": result}}}],
            }
        )
    request = {
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": contents,
        "tools": [{"functionDeclarations": [{"name": n} for n, _, _ in CALLS]}],
    }
    chunks = []
    for part in _gemini_parts(step):
        if "text" in part:
            half = len(part["text"]) // 2
            for piece in (part["text"][:half], part["text"][half:]):
                chunks.append(
                    {"candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}}]}
                )
        else:
            chunks.append({"candidates": [{"content": {"role": "model", "parts": [part]}}]})
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    chunks[-1]["usageMetadata"] = {"promptTokenCount": 100, "candidatesTokenCount": 20}
    return json.dumps(request), sse(*chunks)


# -- Ollama chat ---------------------------------------------------------------------------


def _ollama_reply(step: int) -> dict:
    message: dict = {"role": "assistant", "content": _text_of(step) or ""}
    if step < 2:
        name, args, _ = CALLS[step]
        message["tool_calls"] = [{"function": {"name": name, "arguments": args}}]
    return message


def ollama(step: int, user: str) -> tuple[str, str]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    for done in range(step):
        messages.append(_ollama_reply(done))
        messages.append({"role": "tool", "content": CALLS[done][2], "tool_name": CALLS[done][0]})
    request = {"model": "qwen3:8b", "messages": messages, "stream": True}
    reply = _ollama_reply(step)
    lines = []
    text = reply["content"]
    if text:
        for piece in (text[:4], text[4:]):
            lines.append(
                {
                    "model": "qwen3:8b",
                    "message": {"role": "assistant", "content": piece},
                    "done": False,
                }
            )
    last = {
        "model": "qwen3:8b",
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 100,
        "eval_count": 20,
    }
    if reply.get("tool_calls"):
        last["message"]["tool_calls"] = reply["tool_calls"]
    lines.append(last)
    return json.dumps(request), "".join(json.dumps(line) + "\n" for line in lines)


BUILDERS = {
    "anthropic": anthropic,
    "openai-chat": openai_chat,
    "openai-responses": openai_responses,
    "gemini": gemini,
    "ollama": ollama,
}


def copy_home(home: Path, into: Path) -> Path:
    target = into / "home"
    shutil.copytree(home, target, symlinks=True)
    return target


def write_turn(ledger: Path, trace: str, fmt: str, user: str = USER) -> list[int]:
    """Rewrite the request and response bodies of the first three model calls of `trace`
    (blobs, and the request preview) as provider `fmt` sends them; returns their ids."""
    provider, path = PATHS[fmt]
    conn = sqlite3.connect(ledger)
    try:
        rows = conn.execute(
            "SELECT id, event_id FROM model_calls WHERE trace_id = ? ORDER BY timestamp, id",
            (trace,),
        ).fetchall()[:3]
        assert len(rows) == 3, f"trace {trace} has {len(rows)} model calls"
        for step, (row_id, event_id) in enumerate(rows):
            request, response = BUILDERS[fmt](step, user)
            conn.execute(
                "UPDATE model_calls SET provider = ?, path = ?, request_body_preview = ? "
                "WHERE id = ?",
                (provider, path, request, row_id),
            )
            for direction, body, kind in (
                ("request", request, "application/json"),
                (
                    "response",
                    response,
                    "text/event-stream" if "data:" in response[:20] else "application/json",
                ),
            ):
                data = body.encode()
                conn.execute(
                    "UPDATE event_body_blobs SET body = ?, original_bytes = ?, stored_bytes = ?, "
                    "truncated = 0, body_hash = ?, content_type = ? WHERE event_id = ? "
                    "AND source_table = 'model_calls' AND direction = ?",
                    (data, len(data), len(data), blake3_ref(data), kind, event_id, direction),
                )
        conn.commit()
        return [r[0] for r in rows]
    finally:
        conn.close()
