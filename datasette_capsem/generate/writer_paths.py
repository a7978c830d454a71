"""Writer paths that put a tool result away from its call (spec §4.4), written as Capsem does.

Capsem's writer decides a result's trace when the request carrying it arrives, from the calls
still pending in its `TraceState` (telemetry_hook.rs:619-668). Each path below appends one user
turn to a session, with the rows that decision makes: the result lands in another trace than
its call (or under another id), and the session is not broken. The manifest lists each such
result as the habit `results_in_another_trace` (the rule book's `result_in_another_trace`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from datasette_capsem.generate.content import TOOL_STOP_APIS, Builder, cost_usd, hex_id

PROVIDER_PATHS = {
    "anthropic": ("api.anthropic.com", "/v1/messages", "claude-sonnet-4-5"),
    "openai": ("api.openai.com", "/v1/responses", "gpt-5"),
    "google": (
        "generativelanguage.googleapis.com",
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
        "gemini-2.5-pro",
    ),
}


def _model_call(b: Builder, trace: str, provider: str, *, stop: str | None = "end_turn") -> int:
    """A model call as insert_model_call writes it; `stop=None` is a stream cut before any
    tool call or stop reason (recorded all the same: telemetry_hook.rs:466-479)."""
    _domain, path, model = PROVIDER_PATHS[provider]
    b.tick(200, 2000)
    inp, out = b.rng.randint(800, 4000), b.rng.randint(10, 200)
    return b.ledger.add(
        "model_calls",
        event_id=b.event_id(),
        timestamp=b.ts(),
        provider=provider,
        protocol=provider,
        model=model,
        method="POST",
        path=path,
        stream=1,
        request_body_preview='{"messages": []}',
        status_code=200,
        stop_reason=stop,
        input_tokens=inp,
        output_tokens=out,
        duration_ms=900,
        estimated_cost_usd=cost_usd(provider, model, inp, out, 0),
        trace_id=trace,
        turn_id=b.turn(trace),
    )


def _call(b: Builder, model_call: int, trace: str, call_id: str, name: str) -> int:
    return b.ledger.add(
        "tool_calls",
        event_id=b.event_id(),
        timestamp=b.ts(),
        model_call_id=model_call,
        provider="",
        status="observed",
        call_index=0,
        call_id=call_id,
        tool_name=name,
        arguments="{}",
        origin="native",
        transport="sse",
        server_name="model",
        decision="allowed",
        trace_id=trace,
        turn_id=b.turn(trace),
    )


def _result(b: Builder, model_call: int, trace: str, call_id: str) -> int:
    return b.ledger.add(
        "tool_responses",
        model_call_id=model_call,
        call_id=call_id,
        content_preview="ok",
        is_error=0,
        trace_id=trace,
        turn_id=b.turn(trace),
    )


def _tool_step(b: Builder, provider: str, call_id: str, name: str = "bash") -> str:
    """A user asks and the model calls a tool: a new UUID trace, the call pending in it."""
    trace = str(uuid.UUID(int=b.rng.getrandbits(128), version=4))
    _call(b, _calling_model_call(b, trace, provider), trace, call_id, name)
    return trace


def _calling_model_call(b: Builder, trace: str, provider: str) -> int:
    """A model call that emits tool calls: stop tool_use where the API marks tool turns
    (Anthropic), end_turn elsewhere (content.TOOL_STOP_APIS; a habit the manifest lists)."""
    if provider in TOOL_STOP_APIS:
        return _model_call(b, trace, provider, stop="tool_use")
    model_call = _model_call(b, trace, provider)
    b.end_turn_tools.append(model_call)
    return model_call


def retry(b: Builder) -> list[int]:
    """A tool-result step whose stream was cut before any tool call, then retried with the same
    body: the cut exchange carries the result and, with no tool call and no stop reason,
    completes the trace (telemetry_hook.rs:466-479, 638-653), so the retry's copy of the result
    finds nothing pending and lands in the ambient trace. (A 429/529/5xx answer does the same;
    tests/test_writer_paths.py covers those: here they would add a model_call_quality warning.)"""
    call_id = "toolu_01" + hex_id(b.rng, 20)
    trace = _tool_step(b, "anthropic", call_id)
    _result(b, _model_call(b, trace, "anthropic", stop=None), trace, call_id)
    return [_result(b, _model_call(b, b.ambient, "anthropic"), b.ambient, call_id)]


def resume(b: Builder) -> list[int]:
    """A persistent VM suspended mid-turn and resumed: the new capsem-process has an empty
    TraceState and a new ambient id (capsem-process main.rs:414-416, telemetry.rs:606-618)."""
    call_id = "toolu_01" + hex_id(b.rng, 20)
    _tool_step(b, "anthropic", call_id)
    resumed = hex_id(b.rng, 16)
    return [_result(b, _model_call(b, resumed, "anthropic"), resumed, call_id)]


def history(b: Builder) -> list[int]:
    """OpenAI Responses API: every function_call_output of the input is logged
    (request_parser.rs:292-306), so turn 2 logs turn 1's result again under its own trace."""
    first, second = "call_" + hex_id(b.rng, 24), "call_" + hex_id(b.rng, 24)
    turn1 = _tool_step(b, "openai", first, "shell")
    _result(b, _model_call(b, turn1, "openai"), turn1, first)  # end_turn completes turn 1
    turn2 = str(uuid.UUID(int=b.rng.getrandbits(128), version=4))
    step = _calling_model_call(b, turn2, "openai")
    again = _result(b, step, turn2, first)
    _call(b, step, turn2, second, "shell")
    last = _model_call(b, turn2, "openai")
    sent_again = [again, _result(b, last, turn2, first)]
    _result(b, last, turn2, second)  # answers its call in its own trace
    return sent_again


def gemini_cli(b: Builder) -> list[int]:
    """Gemini CLI on an API key: the writer names the call gemini_<name>_0
    (google_interpreter.rs:201-205), the CLI its result <name>_<epoch-ms>_0
    (request_parser.rs:441-445); nothing is pending under that id, so the result goes to the
    ambient trace."""
    _tool_step(b, "google", "gemini_read_file_0", "read_file")
    result_id = f"read_file_{b.ms()}_0"
    return [_result(b, _model_call(b, b.ambient, "google"), b.ambient, result_id)]


PATHS: dict[str, Callable[[Builder], list[int]]] = {
    "retry": retry,
    "resume": resume,
    "history": history,
    "gemini_cli": gemini_cli,
}
