"""Two turns side by side (`/-/capsem/compare?a=…&b=…`): what changed after a new prompt,
model or policy.

A turn is read as the sequence of tool calls its model calls emitted, in order. The two
sequences are aligned with difflib on the tool names; aligned calls are `same` when their
arguments hash alike (sha256 of the arguments as canonical JSON) and `changed` otherwise, and
calls with no counterpart are `missing` from the other turn. Beside them, the model calls are
paired step by step (step k of one turn with step k of the other) with their tokens, cost,
latency and stop reason, all the ledger's own figures. The first point where the turns diverge
is the first tool call that is not `same`, or, when the tool calls agree, the first step whose
model, stop reason or tool calls differ, or the outcome of the turn.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import sqlite3
from typing import Any

from datasette_capsem.graph import ledgersql as lsql
from datasette_capsem.graph.trace_rows import TraceRows
from datasette_capsem.graph.values import as_float, as_int, clip
from datasette_capsem.ledger.schema import LedgerSchema

ARGUMENT_CHARS = 2000  # arguments shown per call (as indented JSON); the hash covers them whole


def load_arguments(conn: sqlite3.Connection, schema: LedgerSchema, ids: list[int]) -> dict:
    """tool call id -> its full `arguments` (the trace rows hold a preview only)."""
    if not ids or not schema.has("tool_calls", "arguments"):
        return {}
    rows = lsql.run(
        conn,
        "rows_by_id",
        {"ids": lsql.json_list(ids)},
        schema=schema,
        table="tool_calls",
        columns=("id", "arguments"),
    )
    return {row["id"]: row.get("arguments") for row in rows}


def _as_json(arguments: Any, **dumps) -> str | None:
    """The arguments as JSON written with `dumps` options (text that is not JSON, as it is)."""
    if arguments is None:
        return None
    if isinstance(arguments, bytes):
        arguments = arguments.decode("utf-8", "replace")
    text = str(arguments)
    with contextlib.suppress(ValueError, RecursionError):
        text = json.dumps(json.loads(text), **dumps)
    return text


def argument_hash(arguments: Any) -> str | None:
    """sha256 of the arguments as canonical JSON (text that is not JSON, as it is)."""
    text = _as_json(arguments, sort_keys=True, separators=(",", ":"))
    if text is None:
        return None
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def argument_text(arguments: Any) -> str | None:
    """The arguments as a reader sees them: indented JSON when they are JSON (text that is
    not JSON, as it is), cut at ARGUMENT_CHARS."""
    text = _as_json(arguments, indent=2, ensure_ascii=False)
    return None if text is None else clip(text, ARGUMENT_CHARS)


def _order(row: dict[str, Any]) -> tuple:
    return (str(row.get("timestamp") or ""), row["id"])


def turn_steps(rows: TraceRows, arguments: dict[int, Any]) -> dict[str, Any]:
    """The model calls of a turn (steps) and the tool calls they emitted, in order."""
    calls = sorted(rows.model_calls, key=_order)
    step_of = {call["id"]: index for index, call in enumerate(calls)}
    responses: dict[str, dict] = {}
    for response in rows.tool_responses:
        if response.get("call_id") is not None:
            responses.setdefault(str(response["call_id"]), response)
    tools = []
    for tool in sorted(
        rows.tool_calls,
        key=lambda r: (
            step_of.get(r.get("model_call_id"), len(calls)),
            as_int(r.get("call_index")) or 0,
            *_order(r),
        ),
    ):
        full = arguments.get(tool["id"], tool.get("arguments"))
        response = responses.get(str(tool.get("call_id")))
        if response is None:
            outcome = "no response"
        else:
            outcome = "error" if as_int(response.get("is_error")) else "ok"
        tools.append(
            {
                "tool_call": f"tool_calls:{tool['id']}",
                "tool_call_id": tool["id"],
                "name": tool.get("tool_name"),
                "arguments": argument_text(full),
                "arguments_hash": argument_hash(full),
                "status": tool.get("status"),
                "outcome": outcome,
                "duration_ms": as_float(tool.get("duration_ms")),
                "step": step_of.get(tool.get("model_call_id")),
                "model_call_id": tool.get("model_call_id"),
            }
        )
    steps = []
    for index, call in enumerate(calls):
        emitted = [t["name"] for t in tools if t["step"] == index]
        steps.append(
            {
                "step": index,
                "model_call": f"model_calls:{call['id']}",
                "model_call_id": call["id"],
                "model": call.get("model"),
                "provider": call.get("provider"),
                "stop_reason": call.get("stop_reason"),
                "status_code": as_int(call.get("status_code")),
                "input_tokens": as_int(call.get("input_tokens")),
                "output_tokens": as_int(call.get("output_tokens")),
                "cost_usd": as_float(call.get("estimated_cost_usd")),
                "duration_ms": as_float(call.get("duration_ms")),
                "tools": emitted,
            }
        )
    return {"steps": steps, "tools": tools, "totals": _totals(steps, tools)}


def _totals(steps: list[dict], tools: list[dict]) -> dict[str, Any]:
    def total(key: str, cast=int):
        return sum(s[key] or 0 for s in steps) if steps else cast(0)

    return {
        "model_calls": len(steps),
        "tool_calls": len(tools),
        "input_tokens": total("input_tokens"),
        "output_tokens": total("output_tokens"),
        "cost_usd": round(sum(s["cost_usd"] or 0.0 for s in steps), 6),
        "duration_ms": round(sum(s["duration_ms"] or 0.0 for s in steps), 3),
        "tool_errors": sum(1 for t in tools if t["outcome"] == "error"),
        "final_stop_reason": steps[-1]["stop_reason"] if steps else None,
    }


def align_tools(a: list[dict], b: list[dict]) -> list[dict[str, Any]]:
    """Rows of the aligned tool calls: {status, a, b} with status `same`, `changed` (same
    position, other arguments or another tool), `missing_in_a` or `missing_in_b`."""
    matcher = difflib.SequenceMatcher(
        None, [t["name"] for t in a], [t["name"] for t in b], autojunk=False
    )
    rows = []
    for _tag, i1, i2, j1, j2 in matcher.get_opcodes():
        left, right = a[i1:i2], b[j1:j2]
        for k in range(max(len(left), len(right))):
            x = left[k] if k < len(left) else None
            y = right[k] if k < len(right) else None
            if x is not None and y is not None:
                same = x["name"] == y["name"] and x["arguments_hash"] == y["arguments_hash"]
                status = "same" if same else "changed"
                why = (
                    None
                    if same
                    else ("arguments differ" if x["name"] == y["name"] else "another tool")
                )
            else:
                status = "missing_in_b" if y is None else "missing_in_a"
                why = None
            rows.append({"status": status, "why": why, "a": x, "b": y})
    return rows


def pair_steps(a: list[dict], b: list[dict]) -> list[dict[str, Any]]:
    """Step k of one turn beside step k of the other, with the differences of the figures."""
    rows = []
    for k in range(max(len(a), len(b))):
        x = a[k] if k < len(a) else None
        y = b[k] if k < len(b) else None
        row: dict[str, Any] = {"step": k, "a": x, "b": y}
        if x is not None and y is not None:
            row["same"] = (x["model"], x["stop_reason"], x["tools"]) == (
                y["model"],
                y["stop_reason"],
                y["tools"],
            )
            row["delta"] = {
                key: round((y[key] or 0) - (x[key] or 0), 6)
                for key in ("input_tokens", "output_tokens", "cost_usd", "duration_ms")
            }
        else:
            row["same"] = False
        rows.append(row)
    return rows


def divergence(tools: list[dict], steps: list[dict], a: dict, b: dict) -> dict[str, Any] | None:
    """The first point where the turns part, or None when they agree throughout."""
    for index, row in enumerate(tools):
        if row["status"] != "same":
            x, y = row["a"], row["b"]
            if row["status"] == "changed":
                what = (
                    f"tool call {index + 1}: {x['name']} in a, {y['name']} in b"
                    if row["why"] == "another tool"
                    else f"tool call {index + 1}: {x['name']} with other arguments"
                )
            elif row["status"] == "missing_in_b":
                what = f"tool call {index + 1}: {x['name']} in a only"
            else:
                what = f"tool call {index + 1}: {y['name']} in b only"
            side = x or y
            return {"at": "tool_call", "index": index, "step": side["step"], "what": what}
    for row in steps:
        if not row["same"]:
            return {
                "at": "step",
                "index": row["step"],
                "step": row["step"],
                "what": f"step {row['step'] + 1}: model, stop reason or tools differ"
                if row["a"] and row["b"]
                else f"step {row['step'] + 1} in one turn only",
            }
    if a["totals"]["final_stop_reason"] != b["totals"]["final_stop_reason"]:
        return {"at": "outcome", "index": None, "step": None, "what": "the turns end differently"}
    return None


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The comparison of two turns read by `turn_steps`."""
    tools = align_tools(a["tools"], b["tools"])
    steps = pair_steps(a["steps"], b["steps"])
    counts = {
        s: sum(1 for r in tools if r["status"] == s)
        for s in ("same", "changed", "missing_in_a", "missing_in_b")
    }
    delta = {
        key: round((b["totals"][key] or 0) - (a["totals"][key] or 0), 6)
        for key in (
            "model_calls",
            "tool_calls",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "duration_ms",
            "tool_errors",
        )
    }
    return {
        "tools": tools,
        "steps": steps,
        "counts": counts,
        "delta": delta,
        "diverged": divergence(tools, steps, a, b),
        "identical": all(r["status"] == "same" for r in tools) and all(r["same"] for r in steps),
    }
