"""Streamed secrets (issue 25): a credential written through a streamed reply, thinking or
tool call arrives in fragments too short for any rule. A viewer sees every event whose data
adds a fragment replaced by a marker, and the assembled text masked, on every surface the
policy has: a cell (`redact_cell`), a page's data (`redact_tree`, the body page's SSE view
included) and bytes (`mask_bytes`: downloads, hex views, blob cells)."""

from __future__ import annotations

import json

import pytest

from datasette_capsem import redaction
from datasette_capsem.graph.bodies import decode_body

KEY = "ghp_" + "".join(f"Zq{i}X" for i in range(10))
PARTS = ["export GITHUB_TOKEN=", *[KEY[i : i + 5] for i in range(0, len(KEY), 5)], "\n"]


def stream(event_of) -> str:
    events = [f"data: {json.dumps(event_of(part))}" for part in PARTS]
    return "\n\n".join(['data: {"type": "message_start"}', *events, "data: [DONE]"]) + "\n\n"


STREAMS = {
    "anthropic text_delta": lambda p: {
        "type": "content_block_delta",
        "delta": {"type": "text_delta", "text": p},
    },
    "anthropic thinking_delta": lambda p: {
        "type": "content_block_delta",
        "delta": {"type": "thinking_delta", "thinking": p},
    },
    "anthropic input_json_delta": lambda p: {
        "type": "content_block_delta",
        "delta": {"type": "input_json_delta", "partial_json": json.dumps(p)[1:-1]},
    },
    "openai function.arguments": lambda p: {
        "choices": [{"delta": {"tool_calls": [{"function": {"arguments": p}}]}}]
    },
    "openai chat content": lambda p: {"choices": [{"delta": {"content": p}}]},
    "openai responses": lambda p: {"type": "response.function_call_arguments.delta", "delta": p},
}
FRAGMENTS = [part for part in PARTS[1:-1] if "Zq" in part]


def visible(text: str) -> list[str]:
    return [part for part in FRAGMENTS if part in text]


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_a_streamed_secret_is_shown_assembled_and_masked(name):
    text = stream(STREAMS[name])
    assert len(visible(text)) == len(FRAGMENTS)  # the stream holds every fragment
    cell = redaction.redact_cell("response_body_preview", text)
    assert not visible(cell) and redaction.STREAMED_FRAGMENT in cell
    assert "GITHUB_TOKEN=[redacted:" in cell  # the assembled text, masked
    tree = json.dumps(redaction.redact_tree({"rows": [{"preview": text}]}))
    assert not visible(tree)
    body = redaction.mask_bytes(text.encode(), force=True, content_type="text/event-stream")
    assert not visible(body.decode()) and redaction.ASSEMBLED_EVENT.encode() in body
    view = decode_body(text.encode(), "text/event-stream")  # the body page's SSE view
    assert view["kind"] == "sse" and visible(json.dumps(view))  # as an operator sees it
    shown = json.dumps(redaction.redact_tree({"view": view}))
    assert not visible(shown) and redaction.STREAMED_FRAGMENT in shown


def test_events_that_carry_no_fragment_are_kept():
    text = stream(STREAMS["anthropic text_delta"])
    cell = redaction.redact_cell("response_body_preview", text)
    assert 'data: {"type": "message_start"}' in cell and "data: [DONE]" in cell
